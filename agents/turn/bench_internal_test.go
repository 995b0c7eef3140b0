package turn

import "testing"

func BenchmarkParseThreading(b *testing.B) {
	inputs := map[string]string{
		"direct":   `{"session": "C45653", "message": "Looking at claim C45653."}`,
		"prose":    "Sure! Here it is:\n```json\n{\"session\": \"C45653\", \"message\": \"\"}\n```\nHope this helps.",
		"repaired": `{"session": "C45653", "message": "Looking at the cla`,
	}
	for name, raw := range inputs {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				ParseThreading(raw)
			}
		})
	}
}
