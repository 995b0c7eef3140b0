// Package redisurl turns the Redis URL forms conclave accepts into a
// go-redis client:
//
//	redis://[user:password@]host:port[/db][?option=value…]    one node
//	rediss://…                                               one node over TLS
//	unix://[user:password@]/path/to/redis.sock[?db=N]         one node on a socket
//	redis+sentinel://[user:password@]host:port[/db]?master_name=NAME[&addr=host:port…][&password=…]
//	redis+cluster://[user:password@]host:port[?addr=host:port…]
//
// (rediss+sentinel and rediss+cluster use TLS). The options are go-redis'
// own URL options (dial_timeout, read_timeout, pool_size, …). In the
// Sentinel form the user and password of the URL are the Sentinels'; the
// master's go in the username and password options.
//
// Every client honours the deadlines of the contexts it is given (go-redis'
// ContextTimeoutEnabled), so a caller that must answer in time (Slack's
// acknowledgement) is not held by the client's own timeouts.
//
// The connections go-redis keeps for pipelines get the buffers of the
// others (32 KiB each way) unless the URL sets pipeline_read_buffer_size
// or pipeline_write_buffer_size: go-redis would give them 128 KiB each
// way, up to 2.5 MB a client, while conclave's pipelines (a script and a
// few small reads for every message) carry little.
package redisurl

import (
	"cmp"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/redis/go-redis/v9"
)

// bufferSize is go-redis' buffer size for connections other than the
// pipeline pool's (Cluster clients, which have no such pool unless its
// buffers are set, are left alone).
const bufferSize = 32 * 1024

// NewClient returns a client for rawURL. Errors never repeat the URL, which
// may hold a password.
func NewClient(rawURL string) (redis.UniversalClient, error) {
	scheme, _, ok := strings.Cut(rawURL, "://")
	if !ok {
		return nil, errors.New("redis url: want scheme://host:port")
	}
	base, mode, _ := strings.Cut(strings.ToLower(scheme), "+")
	rest := rawURL[len(scheme):]
	switch mode {
	case "":
		o, err := redis.ParseURL(rawURL)
		if err != nil {
			return nil, clean(err)
		}
		o.ContextTimeoutEnabled = true
		o.PipelineReadBufferSize = cmp.Or(o.PipelineReadBufferSize, o.ReadBufferSize, bufferSize)
		o.PipelineWriteBufferSize = cmp.Or(o.PipelineWriteBufferSize, o.WriteBufferSize, bufferSize)
		return redis.NewClient(o), nil
	case "sentinel":
		o, err := redis.ParseFailoverURL(base + rest)
		if err != nil {
			return nil, clean(err)
		}
		if o.MasterName == "" {
			return nil, errors.New("redis url: a sentinel URL needs master_name")
		}
		o.ContextTimeoutEnabled = true
		o.PipelineReadBufferSize = cmp.Or(o.PipelineReadBufferSize, o.ReadBufferSize, bufferSize)
		o.PipelineWriteBufferSize = cmp.Or(o.PipelineWriteBufferSize, o.WriteBufferSize, bufferSize)
		return redis.NewFailoverClient(o), nil
	case "cluster":
		o, err := redis.ParseClusterURL(base + rest)
		if err != nil {
			return nil, clean(err)
		}
		o.ContextTimeoutEnabled = true
		return redis.NewClusterClient(o), nil
	}
	return nil, fmt.Errorf("redis url: unknown scheme %q (want redis, rediss, unix, redis+sentinel or redis+cluster)", scheme)
}

// clean drops the URL that net/url errors quote.
func clean(err error) error {
	if ue, ok := errors.AsType[*url.Error](err); ok {
		err = ue.Err
	}
	return fmt.Errorf("redis url: %w", err)
}
