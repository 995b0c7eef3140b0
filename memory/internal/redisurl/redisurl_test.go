package redisurl

import (
	"fmt"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestNewClient(t *testing.T) {
	tests := []struct {
		url, want string // want: the client's type, or an error's text
	}{
		{"redis://127.0.0.1:6379/2?dial_timeout=1s", "*redis.Client"},
		{"rediss://user:pw@example.com:6380", "*redis.Client"},
		{"unix:///run/redis.sock?db=1", "*redis.Client"},
		{"redis+sentinel://s1:26379?master_name=mymaster&addr=s2:26379", "*redis.Client"},
		{"REDIS+CLUSTER://n1:7000?addr=n2:7001&addr=n3:7002", "*redis.ClusterClient"},
		{"rediss+cluster://n1:7000", "*redis.ClusterClient"},
		{"redis+sentinel://s1:26379", "needs master_name"},
		{"redis+ring://n1:7000", "unknown scheme"},
		{"http://n1:7000", "invalid URL scheme"},
		{"127.0.0.1:6379", "want scheme://host:port"},
		{"redis://u:hunter2@127.0.0.1:6379?nosuch=1", "nosuch"},
		{"redis://u:hunter2@127.0.0.1:port", "redis url"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := NewClient(tt.url)
			var got string
			if err != nil {
				got = err.Error()
			} else {
				got = fmt.Sprintf("%T", c)
				c.Close()
			}
			if !strings.Contains(got, tt.want) {
				t.Errorf("NewClient = %s, want %s", got, tt.want)
			}
			if strings.Contains(got, "hunter2") {
				t.Errorf("the error repeats the password: %s", got)
			}
		})
	}
}

func TestPipelineBuffers(t *testing.T) {
	tests := []struct {
		url         string
		read, write int
	}{
		{"redis://127.0.0.1:6379", 32 * 1024, 32 * 1024},
		{"redis://127.0.0.1:6379?pipeline_read_buffer_size=131072", 128 * 1024, 32 * 1024},
		{"redis://127.0.0.1:6379?pipeline_write_buffer_size=65536", 32 * 1024, 64 * 1024},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			c, err := NewClient(tt.url)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			o := c.(*redis.Client).Options()
			if o.PipelineReadBufferSize != tt.read || o.PipelineWriteBufferSize != tt.write {
				t.Errorf("pipeline buffers %d, %d; want %d, %d", o.PipelineReadBufferSize, o.PipelineWriteBufferSize, tt.read, tt.write)
			}
		})
	}
}
