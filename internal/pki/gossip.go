package pki

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
)

// NewGossipKey is a new gossip key: 32 random bytes (AES-256), in
// standard base64, the form LoadGossipKey reads.
func NewGossipKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("pki: make gossip key: %w", err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// LoadGossipKey reads the gossip key in path: standard base64, surrounding
// whitespace ignored, of 16, 24 or 32 bytes (AES-128, -192 or -256, as
// memberlist takes them). Its errors never hold the key.
func LoadGossipKey(path string) ([]byte, error) {
	fix := fmt.Sprintf("run 'braid certs gossip-key > %s'", path)
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("pki: gossip key file %s does not exist: %s, and give every node the same file", path, fix)
	}
	if err != nil {
		return nil, fmt.Errorf("pki: cannot read gossip key file %s: %v", path, pathCause(err))
	}
	s := strings.TrimSpace(string(data))
	if s == "" {
		return nil, fmt.Errorf("pki: gossip key file %s is empty: %s", path, fix)
	}
	key, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		// Not err itself: it is harmless, but says nothing a user can act on.
		return nil, fmt.Errorf("pki: gossip key file %s is not base64: %s", path, fix)
	}
	switch len(key) {
	case 16, 24, 32:
		return key, nil
	}
	return nil, fmt.Errorf("pki: gossip key in %s is %d bytes, not 16, 24 or 32: %s", path, len(key), fix)
}
