package turn

import "testing"

// TestSpeakerOfReadsSpeakerLabel: what SpeakerLabel writes, SpeakerOf
// reads back, for a person and for an agent; text without a label is not
// taken for one.
func TestSpeakerOfReadsSpeakerLabel(t *testing.T) {
	tests := []struct {
		name, author, ens, text string
	}{
		{"a person", "Ada", "", "Is customer C45653 covered?"},
		{"an agent", "Claudine", "claudine.acme.137.protocol6022.eth", "C45653 holds gold cover."},
		{"a name with parentheses", "Ada (claims)", "", "ok: (yes): fine"},
		{"empty text", "Ada", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := HistoryMessage{Author: SpeakerLabel(tt.author, tt.ens), Content: tt.text}
			name, ensDomain, text, ok := SpeakerOf(h.Text(0))
			if !ok || name != tt.author || ensDomain != tt.ens || text != tt.text {
				t.Errorf("SpeakerOf(%q) = %q, %q, %q, %v; want %q, %q, %q, true", h.Text(0), name, ensDomain, text, ok, tt.author, tt.ens, tt.text)
			}
		})
	}
	for _, s := range []string{"Reply with only a JSON object.", "a (note) without a colon", "x): y", ""} {
		if _, _, text, ok := SpeakerOf(s); ok || text != s {
			t.Errorf("SpeakerOf(%q) = %q, %v; want the text back and false", s, text, ok)
		}
	}
}
