package engine

import (
	"encoding/json"
	"testing"
)

// TestLatin1Text: latin1 bytes become their UTF-8 characters, as plain
// text and as a JSON string with the characters JSON needs escaped.
func TestLatin1Text(t *testing.T) {
	in := []byte("plain \"q\" \\ \n\x01 caf\xe9 \xff end")
	const want = "plain \"q\" \\ \n\x01 café ÿ end"
	if got := string(appendLatin1Text([]byte("<"), in, false)); got != "<"+want {
		t.Errorf("text %q, want %q", got, "<"+want)
	}
	quoted := appendLatin1Text(nil, in, true)
	var back string
	if err := json.Unmarshal(quoted, &back); err != nil || back != want {
		t.Errorf("JSON %s decodes to %q (%v), want %q", quoted, back, err, want)
	}
	if got := string(appendLatin1Text(nil, []byte("ascii"), true)); got != `"ascii"` {
		t.Errorf("JSON %s, want \"ascii\"", got)
	}
}
