package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// SessionInfos implements Manager.
func (s *InProcess) SessionInfos(_ context.Context, namespace, prefix string) ([]SessionInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.sessions[namespace]
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
func (s *InProcess) ForgetSession(_ context.Context, namespace, key string) (Forgotten, error) {
	if key == "" {
		return Forgotten{}, errNoSessionKey
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	entries, ok := s.sessions[namespace][key]
	if !ok {
		return Forgotten{}, fmt.Errorf("memory: session %q of %s: %w", key, namespace, ErrNotFound)
	}
	delete(s.sessions[namespace], key)
	delete(s.used[namespace], key)
	f := Forgotten{Entries: len(entries), Conversations: sourceConversations(entries)}
	for _, id := range f.Conversations {
		s.dropTraces(id)
		delete(s.feedback, id)
	}
	return f, nil
}
