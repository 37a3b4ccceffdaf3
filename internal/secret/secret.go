// Package secret seals the passwords a cluster keeps in Raft, so that
// raft.db, its snapshots and a follower's copy hold none in clear.
//
// A Box seals with AES-256-GCM under a key derived (HKDF-SHA256) from the
// cluster's shared key material: --secrets-key-file, or the gossip key
// every node already holds. Every node of a cluster derives the same key,
// so whichever node runs a destination can open its passwords.
//
// Invariants: a sealed value starts with Prefix and never equals its
// plain text; Open of anything Seal did not make under the same key
// fails; neither the key nor a plain text appears in an error.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"
)

// Prefix starts every sealed value.
const Prefix = "braid-sealed:v1:"

// ErrNoKey: a sealed value met a node without the key to open it.
var ErrNoKey = errors.New("secret: the value is sealed and this node has no secrets key (its own, or the cluster's gossip key)")

// ErrOpen: a sealed value does not open under this node's key.
var ErrOpen = errors.New("secret: the value does not open with this node's secrets key: every node of a cluster needs the same secrets key (or gossip key)")

// Box seals and opens values under one key. A nil *Box seals nothing
// (Seal returns its input) and opens only plain values.
type Box struct {
	aead cipher.AEAD
}

// NewBox derives the sealing key from material (at least 16 bytes).
func NewBox(material []byte) (*Box, error) {
	if len(material) < 16 {
		return nil, errors.New("secret: the key material is under 16 bytes: make a key with braid certs gossip-key")
	}
	key, err := hkdf.Key(sha256.New, material, nil, "braid secrets in raft v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &Box{aead: aead}, nil
}

// IsSealed reports whether v is a sealed value.
func IsSealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// Seal returns v sealed; an empty v, an already sealed one, or any v with
// a nil Box, is returned as it is.
func (b *Box) Seal(v string) string {
	if b == nil || v == "" || IsSealed(v) {
		return v
	}
	nonce := make([]byte, b.aead.NonceSize())
	rand.Read(nonce) // never fails (crypto/rand)
	out := b.aead.Seal(nonce, nonce, []byte(v), []byte(Prefix))
	return Prefix + base64.RawStdEncoding.EncodeToString(out)
}

// Open returns the plain text of a sealed v, and a plain v as it is.
func (b *Box) Open(v string) (string, error) {
	if !IsSealed(v) {
		return v, nil
	}
	if b == nil {
		return "", ErrNoKey
	}
	raw, err := base64.RawStdEncoding.DecodeString(v[len(Prefix):])
	ns := b.aead.NonceSize()
	if err != nil || len(raw) < ns {
		return "", ErrOpen
	}
	plain, err := b.aead.Open(nil, raw[:ns], raw[ns:], []byte(Prefix))
	if err != nil {
		return "", ErrOpen
	}
	return string(plain), nil
}
