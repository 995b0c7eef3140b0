// Package turn runs one agent's turn apart from the conversation it runs
// in: an Input value in (the agent, the thread as its own Message values,
// the team with identities resolved, what the state says of the
// exchange, the channel's description, its session's entries, the keys
// it is offered …), a Result value out (its reply, notes, threading
// outcome), with its Report and Trace read from the Turn once it ended.
//
// The Runner renders and fits its requests (BuildRequest), calls the
// model and the tools it asks for, retries a request the model's context
// window refused with half the history, reads an expert's threading
// reply (ParseThreading), matches its key against its sessions
// (MatchSession) and refuses those it may not use (CheckKey,
// KeyWritten), and shows a reply while it is written (Stream) through
// the one-method Shower port the engine implements. The rules a reply is
// read by live here too: where :end: counts (HasEnd, StripEnd), which
// agents a text names (FindMentions), the reason a failed turn's notice
// gives (NoticeReason).
//
// It imports neither the store (memory) nor a transport (bot), and of
// the engine only the model client (agents/llm) and the conversation's
// values (agents/conversation): the engine gathers what a turn needs and
// converts at its edge.
package turn
