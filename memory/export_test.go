package memory

import "context"

// ParkSessions makes r park commits' session appends in the conversation's
// outbox, as it does on Redis Cluster.
func (r *Redis) ParkSessions() { r.direct = false }

// CommitParked writes c as Commit does but leaves its session appends
// parked, as a crash right after the conversation write would.
func (r *Redis) CommitParked(ctx context.Context, l Lock, c Commit) error {
	_, _, err := r.commit(ctx, r.keys.conv(l.ConversationID), l, c, false)
	return err
}

// AppendOnce applies a as part of commit id: once only.
func (r *Redis) AppendOnce(ctx context.Context, a SessionAppend, id string) error {
	return r.appendSession(ctx, a, id)
}
