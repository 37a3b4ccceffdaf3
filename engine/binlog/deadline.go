package binlog

import (
	"net"
	"sync"
	"time"
)

// deadlineSlack is how much later than asked a binlog connection's read
// deadline may fall (coarseDeadlines).
const deadlineSlack = time.Second

// coarseDeadlines is a binlog connection that moves its read deadline on
// the socket only when the one asked for leaves the one set: go-mysql
// moves it to now + ReadTimeout three times an event (twice while reading
// a packet, once after it), and each move resets a runtime timer, about
// 6% of `braid capture`'s CPU on the orders shape (issue 44). A later
// deadline is set deadlineSlack later than asked, and stays while the
// ones asked for are within deadlineSlack before it: a silent server is
// still noticed, never before ReadTimeout and at most deadlineSlack
// after. An earlier one (go-mysql's Close cuts a read short) and none are
// set as asked. Safe for concurrent use: Close sets it from another
// goroutine than the reader's.
type coarseDeadlines struct {
	net.Conn
	mu  sync.Mutex
	set time.Time // the read deadline on the socket; zero: none
}

func (c *coarseDeadlines) SetReadDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case t.IsZero(): // none
	case c.set.IsZero() || t.After(c.set):
		t = t.Add(deadlineSlack)
	case c.set.Sub(t) <= deadlineSlack:
		return nil // the deadline set falls within the slack after t
	}
	if err := c.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	c.set = t
	return nil
}

// SetDeadline sets both deadlines as asked.
func (c *coarseDeadlines) SetDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.Conn.SetDeadline(t); err != nil {
		return err
	}
	c.set = t
	return nil
}
