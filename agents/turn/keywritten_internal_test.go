package turn

import "testing"

func TestKeyWritten(t *testing.T) {
	tests := []struct {
		key, text string
		want      bool
	}{
		{"C45653", "customer C45653.", true},
		{"C45653", "customer c-45 653", true},
		{"C45653", "customer C45654", false},
		{"C45653", "customer C456531", false},
		{"C45653", "customer 1C45653", true}, // a letter starts the key: a digit before is another word
		{"45653", "ref 145653", false},
		{"C2", "claim C2 covered?", true},
		{"C2", "claim C23", false},
		{"", "anything", false},
	}
	for _, tt := range tests {
		if got := KeyWritten(tt.key, []string{"unrelated", tt.text}); got != tt.want {
			t.Errorf("KeyWritten(%q, %q) = %v, want %v", tt.key, tt.text, got, tt.want)
		}
	}
}
