package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// inManager is the part of the in-process store that answers Manager:
// it describes a namespace's sessions and forgets one with the traces
// of the conversations its entries came from. It works on the store's
// sessions and traces parts, under the store's mutex, which they share.
type inManager struct {
	sess *inSessions // the store's
	tr   *inTraces   // the store's
}

// SessionInfos implements Manager.
func (m *inManager) SessionInfos(_ context.Context, namespace, prefix string) ([]SessionInfo, error) {
	m.sess.mu.Lock()
	defer m.sess.mu.Unlock()
	ns := m.sess.sessions[namespace]
	var out []SessionInfo
	for _, key := range slices.Sorted(maps.Keys(ns)) {
		if strings.HasPrefix(key, prefix) {
			out = append(out, sessionInfo(key, ns[key]))
		}
	}
	return out, nil
}

// ForgetSession implements Manager: the session and the traces of its
// conversations go under the store's lock, together.
func (m *inManager) ForgetSession(_ context.Context, namespace, key string) (Forgotten, error) {
	if key == "" {
		return Forgotten{}, errNoSessionKey
	}
	m.sess.mu.Lock()
	defer m.sess.mu.Unlock()
	entries, ok := m.sess.sessions[namespace][key]
	if !ok {
		return Forgotten{}, fmt.Errorf("memory: session %q of %s: %w", key, namespace, ErrNotFound)
	}
	delete(m.sess.sessions[namespace], key)
	delete(m.sess.used[namespace], key)
	f := Forgotten{Entries: len(entries), Conversations: sourceConversations(entries)}
	for _, id := range f.Conversations {
		m.tr.dropTraces(id)
		delete(m.tr.feedback, id)
	}
	return f, nil
}
