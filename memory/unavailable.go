package memory

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"
)

// busyReplies are the Redis error replies of a server that is up but cannot
// serve yet: loading its data set, running a long script, resharding or
// failing over. They pass with time, as a refused connection does.
var busyReplies = []string{"LOADING ", "BUSY ", "TRYAGAIN ", "CLUSTERDOWN ", "MASTERDOWN ", "READONLY "}

// Unavailable reports whether err says the store did not answer — a
// connection refused, reset or timed out, a server still loading or failing
// over — rather than that the call was wrong or came too late for its
// caller: the same call may succeed a moment later. A validation error, a
// missing record, a lost lock, a cancelled context or a closed store are
// not unavailability.
func Unavailable(err error) bool {
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, redis.ErrClosed):
		return false
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, redis.ErrPoolTimeout),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return true
	}
	if _, ok := errors.AsType[net.Error](err); ok {
		return true
	}
	if re, ok := errors.AsType[redis.Error](err); ok {
		msg := re.Error() + " "
		for _, p := range busyReplies {
			if strings.HasPrefix(msg, p) {
				return true
			}
		}
	}
	return false
}
