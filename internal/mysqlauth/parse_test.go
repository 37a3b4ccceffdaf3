package mysqlauth_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/braid-cdc/braid/internal/mysqlauth"
)

// trickle is a net.Conn that reads its script one byte at a time.
type trickle struct {
	net.Conn
	r io.Reader
}

func (t *trickle) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return t.r.Read(p[:1])
}
func (t *trickle) Close() error { return nil }

func packet(seq byte, payload ...[]byte) []byte {
	b := bytes.Join(payload, nil)
	return append([]byte{byte(len(b)), byte(len(b) >> 8), byte(len(b) >> 16), seq}, b...)
}

func greeting(plugin string) []byte {
	var b []byte
	b = append(b, 10)
	b = append(b, "10.11.9-MariaDB\x00"...)
	b = binary.LittleEndian.AppendUint32(b, 1)
	b = append(b, "12345678\x00"...)
	b = append(b, 0xff, 0xf7, 33, 2, 0, 0xff, 0x81, 21)
	b = append(b, make([]byte, 10)...)
	b = append(b, "9abcdefghijk\x00"...)
	return append(b, plugin+"\x00"...)
}

// readAll reads c to its end or error, returning what it delivered.
func readAll(c net.Conn) ([]byte, error) {
	var got []byte
	buf := make([]byte, 7)
	for {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			return got, err
		}
	}
}

// TestGuardParsesAcrossReads: whatever the reads' sizes, a request for
// clear text is refused before its last byte is delivered, and what
// follows an OK is passed through unread.
func TestGuardParsesAcrossReads(t *testing.T) {
	clearSwitch := packet(2, []byte{0xfe}, []byte("mysql_clear_password\x00"))
	for name, c := range map[string]struct {
		script  [][]byte
		refused bool
	}{
		"clear switch":        {[][]byte{packet(0, greeting("mysql_native_password")), clearSwitch}, true},
		"clear in greeting":   {[][]byte{packet(0, greeting("mysql_clear_password"))}, true},
		"dialog":              {[][]byte{packet(0, greeting("mysql_native_password")), packet(2, []byte{0xfe}, []byte("dialog\x00"))}, true},
		"old switch":          {[][]byte{packet(0, greeting("mysql_native_password")), packet(2, []byte{0xfe})}, true},
		"full authentication": {[][]byte{packet(0, greeting("caching_sha2_password")), packet(2, []byte{1, 4})}, true},
		"public key":          {[][]byte{packet(0, greeting("sha256_password")), packet(2, []byte{1}, []byte("-----BEGIN PUBLIC KEY-----"))}, true},
		"ed25519 then data": {[][]byte{packet(0, greeting("mysql_native_password")),
			packet(2, []byte{0xfe}, []byte("client_ed25519\x00"), make([]byte, 32)), packet(4, []byte{0, 0, 0, 2, 0, 0, 0}),
			clearSwitch}, false},
		"fast auth then data": {[][]byte{packet(0, greeting("caching_sha2_password")), packet(2, []byte{1, 3}), packet(3, []byte{0, 0, 0, 2, 0}),
			clearSwitch}, false},
		"error": {[][]byte{packet(0, greeting("mysql_native_password")), packet(2, []byte{0xff, 0x15, 0x04}, []byte("#28000denied")), clearSwitch}, false},
	} {
		t.Run(name, func(t *testing.T) {
			script := bytes.Join(c.script, nil)
			g := mysqlauth.Guard(&trickle{r: bytes.NewReader(script)})
			got, err := readAll(g)
			if !c.refused {
				if err != io.EOF || !bytes.Equal(got, script) {
					t.Fatalf("read %d of %d bytes: %v", len(got), len(script), err)
				}
				return
			}
			if !errors.Is(err, mysqlauth.ErrClearText) || !errors.Is(g.Refused(), mysqlauth.ErrClearText) {
				t.Fatalf("not refused: %v", err)
			}
			if len(got) >= len(script) {
				t.Errorf("the whole request was delivered (%d bytes)", len(got))
			}
			if _, werr := g.Write([]byte("password")); !errors.Is(werr, mysqlauth.ErrClearText) {
				t.Errorf("a write after the refusal: %v", werr)
			}
		})
	}
}
