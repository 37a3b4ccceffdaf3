package netlimit_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/braid-cdc/braid/internal/netlimit"
	"github.com/braid-cdc/braid/internal/testutil/retry"
)

// TestCap: past the cap a connection is closed at once while those served
// go on; a closed one makes room for the next.
func TestCap(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := netlimit.Listen(inner, 2, nil)
	defer l.Close()
	go func() { // an echo server
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	dial := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	echoes := func(c net.Conn, msg string) bool {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := fmt.Fprintln(c, msg); err != nil {
			return false
		}
		got, err := bufio.NewReader(c).ReadString('\n')
		return err == nil && got == msg+"\n"
	}
	a, b := dial(), dial()
	defer a.Close()
	defer b.Close()
	if !echoes(a, "a") || !echoes(b, "b") {
		t.Fatal("the first two connections are not served")
	}
	c := dial()
	if echoes(c, "c") {
		t.Fatal("a third connection was served past a cap of two")
	}
	c.Close()
	if !echoes(a, "a again") {
		t.Error("a served connection stopped when one past the cap came")
	}
	if n := l.Refused(); n != 1 {
		t.Errorf("refused %d, want 1", n)
	}
	b.Close()
	retry.Until(t, 2*time.Second, func() error {
		d := dial()
		defer d.Close()
		if !echoes(d, "d") {
			return errors.New("no room after a served connection closed")
		}
		return nil
	})
}
