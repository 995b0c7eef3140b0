// Package turn holds what one agent's turn reads and decides apart from
// the conversation it runs in: how its request is built and fitted into
// its input budget (BuildRequest), how an expert's threading reply is
// read (ParseThreading), which of its sessions a key names
// (MatchSession) and which keys are refused (CheckKey, KeyWritten),
// where a reply's :end: counts (HasEnd, StripEnd), the reason a failed
// turn's notice gives (NoticeReason), the pacing of a reply shown while
// it is written (Stream, through the one-method Shower port the engine
// implements), what a turn reads of its conversation (Input: the thread
// as its own Message values, the channel's description, its session's
// entries …) and what it produced, as a value (Result).
//
// It imports neither the store (memory) nor a transport (bot), and
// nothing of the engine (agents) but the model client (agents/llm): the
// engine gathers what a turn needs and converts at its edge.
package turn
