// Package turn holds what one agent's turn reads and decides apart from
// the conversation it runs in: how an expert's threading reply is read
// (ParseThreading), which of its sessions a key names (MatchSession) and
// which keys are refused (CheckKey, KeyWritten), and how a turn's
// request is built and fitted into its input budget (BuildRequest).
//
// It imports neither the store (memory) nor a transport (bot), and
// nothing of the engine (agents) but the model client (agents/llm): the
// engine gathers what a turn needs and converts at its edge.
package turn
