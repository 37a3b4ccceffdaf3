package secret

import (
	"errors"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	b, err := NewBox([]byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	s := b.Seal("hunter2")
	if !IsSealed(s) || strings.Contains(s, "hunter2") {
		t.Fatalf("sealed %q", s)
	}
	if s2 := b.Seal("hunter2"); s2 == s {
		t.Fatal("two seals of one value are equal: the nonce is not fresh")
	}
	if b.Seal(s) != s {
		t.Fatal("sealing a sealed value changed it")
	}
	got, err := b.Open(s)
	if err != nil || got != "hunter2" {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if got, err := b.Open("plain"); err != nil || got != "plain" {
		t.Fatalf("Open(plain) = %q, %v", got, err)
	}
	other, _ := NewBox([]byte("another key of at least 16 bytes"))
	if _, err := other.Open(s); !errors.Is(err, ErrOpen) {
		t.Fatalf("another key opened it: %v", err)
	}
	var none *Box
	if _, err := none.Open(s); !errors.Is(err, ErrNoKey) {
		t.Fatalf("no key: %v", err)
	}
	if none.Seal("x") != "x" {
		t.Fatal("a nil Box sealed")
	}
	if _, err := b.Open(Prefix + "AAAA"); !errors.Is(err, ErrOpen) {
		t.Fatalf("truncated: %v", err)
	}
	if _, err := NewBox([]byte("short")); err == nil {
		t.Fatal("short key material accepted")
	}
}
