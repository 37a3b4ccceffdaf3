package binlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/go-mysql-org/go-mysql/mysql"

	"github.com/braid-cdc/braid/engine/change"
)

// A snapshot's chunks are most of its cost, and go-mysql's result reader
// copies each row packet twice and parses every value into a FieldValue
// that TextRows would print back to text. textRows instead sends the
// query and reads the result off the socket itself, copying each value's
// text once, from the read buffer into the rows. It takes the connection
// between two of go-mysql's commands: go-mysql has read each of its
// replies whole, so nothing of the connection is left in its buffer, and
// textRows reads its own reply whole before go-mysql sends again.

// packetReader reads MySQL protocol packets from a buffered socket.
type packetReader struct {
	br      *bufio.Reader
	seq     uint8
	consume int    // bytes of the last packet still in br
	big     []byte // a packet larger than br's buffer, joined
}

// maxPayload is the largest payload of one packet; a packet that long
// continues in the next.
const maxPayload = 1<<24 - 1

// next returns the next packet's payload, valid until the following call.
func (r *packetReader) next() ([]byte, error) {
	if r.consume > 0 {
		r.br.Discard(r.consume)
		r.consume = 0
	}
	var joined []byte
	for {
		hdr, err := r.br.Peek(4)
		if err != nil {
			return nil, err
		}
		n := int(hdr[0]) | int(hdr[1])<<8 | int(hdr[2])<<16
		if hdr[3] != r.seq {
			return nil, fmt.Errorf("packet %d arrived where %d was due", hdr[3], r.seq)
		}
		r.seq++
		r.br.Discard(4)
		if joined == nil && n < maxPayload && n <= r.br.Size() {
			p, err := r.br.Peek(n)
			if err != nil {
				return nil, err
			}
			r.consume = n
			return p, nil
		}
		at := len(joined)
		if joined == nil {
			joined = r.big[:0]
		}
		joined = append(joined, make([]byte, n)...)
		if _, err := io.ReadFull(r.br, joined[at:]); err != nil {
			return nil, err
		}
		if n < maxPayload {
			r.big = joined[:0]
			return joined, nil
		}
	}
}

// textRows sends query (a SELECT of rows.Columns() columns) and adds the
// text of each value of its result to rows.
func (s *SnapshotConn) textRows(query string, rows *change.TextRows) (err error) {
	defer func() {
		if err != nil && !isServerError(err) {
			// Cut short: the rest of the reply is still on its way.
			s.broken = fmt.Errorf("binlog: source %s: the snapshot connection broke earlier: %w", s.p.spec.Name, err)
			s.c.Close()
		}
	}()
	cmd := make([]byte, 5+len(query))
	n := 1 + len(query)
	if n >= maxPayload {
		return errors.New("query too long")
	}
	cmd[0], cmd[1], cmd[2], cmd[3], cmd[4] = byte(n), byte(n>>8), byte(n>>16), 0, mysql.COM_QUERY
	copy(cmd[5:], query)
	if _, err := s.c.Conn.Conn.Write(cmd); err != nil {
		return err
	}
	r := s.rd
	r.seq = 1
	p, err := r.next()
	if err != nil {
		return err
	}
	switch p[0] {
	case mysql.ERR_HEADER:
		return s.serverError(p)
	case mysql.OK_HEADER:
		return errors.New("the query returned no result set")
	}
	cols, _, _ := mysql.LengthEncodedInt(p)
	if want := rows.Columns(); int(cols) != want {
		return fmt.Errorf("%d columns, the schema has %d", cols, want)
	}
	defs := int(cols)
	if !s.deprecateEOF {
		defs++
	}
	for range defs {
		if _, err := r.next(); err != nil {
			return err
		}
	}
	for {
		p, err := r.next()
		if err != nil {
			return err
		}
		switch {
		case p[0] == mysql.EOF_HEADER && len(p) < maxPayload:
			return nil
		case p[0] == mysql.ERR_HEADER:
			return s.serverError(p)
		}
		if err := addTextRow(rows, p, int(cols)); err != nil {
			return err
		}
	}
}

// addTextRow adds the values of a text-protocol row packet: each a
// length-encoded string, or 0xfb for NULL.
func addTextRow(rows *change.TextRows, p []byte, cols int) error {
	at := 0
	for range cols {
		if at >= len(p) {
			return errors.New("a row packet ends before its last column")
		}
		var n, head int
		switch b := p[at]; {
		case b < 0xfb:
			n, head = int(b), 1
		case b == 0xfb:
			rows.Add(nil)
			at++
			continue
		case b == 0xfc && at+3 <= len(p):
			n, head = int(binary.LittleEndian.Uint16(p[at+1:])), 3
		case b == 0xfd && at+4 <= len(p):
			n, head = int(p[at+1])|int(p[at+2])<<8|int(p[at+3])<<16, 4
		case b == 0xfe && at+9 <= len(p):
			n, head = int(binary.LittleEndian.Uint64(p[at+1:])), 9
		default:
			return fmt.Errorf("a row packet has a bad length byte 0x%x", b)
		}
		at += head
		if n < 0 || at+n > len(p) {
			return errors.New("a row packet ends inside a value")
		}
		rows.Add(p[at : at+n : at+n])
		at += n
	}
	return nil
}

// serverError is the error an ERR packet reports.
func (s *SnapshotConn) serverError(p []byte) error {
	return s.c.HandleErrorPacket(append([]byte(nil), p...)) // it keeps p's text
}

// isServerError tells whether err is the server's answer (the connection
// stays usable) rather than a broken read.
func isServerError(err error) bool {
	var me *mysql.MyError
	return errors.As(err, &me)
}
