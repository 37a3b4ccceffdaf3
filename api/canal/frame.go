package canal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// MaxClientFrame is the default bound on a frame a client sends. canal's
// clients send small requests (a GET is a few dozen bytes); 16 MiB leaves
// room for any of them and keeps a hostile length header from costing
// memory.
const MaxClientFrame = 16 << 20

// MaxLoginFrame bounds a frame a client sends before it has logged in
// (its CLIENTAUTHENTICATION is a few hundred bytes).
const MaxLoginFrame = 64 << 10

// ErrFrameTooLarge: a frame's length header exceeds the bound.
var ErrFrameTooLarge = errors.New("canal: frame too large")

// readChunk is how much of a frame's body is allocated ahead of the bytes
// actually arriving, so a length header that promises more than the peer
// sends costs little memory.
const readChunk = 64 << 10

// ReadFrame reads one frame: a 4-byte big-endian length, then that many
// bytes of body. A length above max fails with ErrFrameTooLarge before any
// of the body is read or allocated; a stream that ends inside a frame fails
// with io.ErrUnexpectedEOF (io.EOF when it ends before the frame begins).
func ReadFrame(r io.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: length header says %d bytes, the limit is %d", ErrFrameTooLarge, n, max)
	}
	// Grow the body as bytes arrive rather than trusting the header.
	body := make([]byte, 0, min(int(n), readChunk))
	for len(body) < int(n) {
		want := min(int(n)-len(body), readChunk)
		if cap(body)-len(body) < want {
			body = append(body[:cap(body)], make([]byte, want)...)[:len(body)]
		}
		m, err := io.ReadFull(r, body[len(body):len(body)+want])
		body = body[:len(body)+m]
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

// AppendFrame appends body as a frame to b.
func AppendFrame(b, body []byte) ([]byte, error) {
	if len(body) > math.MaxInt32 {
		return b, fmt.Errorf("%w: %d bytes cannot be framed", ErrFrameTooLarge, len(body))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	return append(b, body...), nil
}
