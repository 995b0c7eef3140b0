package turn

import "strings"

// personLabel is what SpeakerLabel writes in place of a person's ENS name.
const personLabel = "person"

// SpeakerOf reads back the label SpeakerLabel writes before a history
// message's content ("Ada (person): …", "Claudine (claudine.acme…eth): …"):
// the author's name, its ENS name ("" for a person) and the text after the
// label. ok is false when content carries no label (a phase prompt, a
// hydrated entry).
func SpeakerOf(content string) (name, ensDomain, text string, ok bool) {
	end := strings.Index(content, "): ")
	if end < 0 {
		return "", "", content, false
	}
	open := strings.LastIndex(content[:end], " (")
	if open < 0 {
		return "", "", content, false
	}
	name, ensDomain, text = content[:open], content[open+2:end], content[end+3:]
	if ensDomain == personLabel {
		ensDomain = ""
	}
	return name, ensDomain, text, true
}
