package stream

import (
	"errors"
	"fmt"
	"strings"

	"github.com/braid-cdc/braid/group"
)

// SinkClientPrefix starts the client id of every sink (package sink names
// sink NAME's client "sink:NAME"). Sinks run inside the node and read the
// store directly; the servers refuse the prefix to every user
// (CheckClientID), so no consumer can read or ack as a sink and move the
// cursor a takeover resumes that sink from.
const SinkClientPrefix = "sink:"

// ErrReservedClientID: a consumer named a client id of the sinks'
// namespace (SinkClientPrefix).
var ErrReservedClientID = errors.New("stream: client id reserved for sinks")

// ErrTooManyClients: an owner already has as many client ids on the
// store as Config.MaxClientsPerOwner allows.
var ErrTooManyClients = errors.New("stream: too many client ids")

// DefaultMaxClientsPerOwner is Config.MaxClientsPerOwner's default.
const DefaultMaxClientsPerOwner = 100

// CheckClientID refuses a client id that a consumer may not use: one in
// the sinks' namespace, or the one the destination's start cursor is
// kept under (group.StartCursorID).
func CheckClientID(id string) error {
	if id == group.StartCursorID {
		return fmt.Errorf("%w: client id %q names the destination's start cursor: choose another client id", ErrReservedClientID, id)
	}
	if strings.HasPrefix(id, SinkClientPrefix) {
		return fmt.Errorf("%w: client id %q: the prefix %q is reserved for the destination's sinks, which run inside the node: choose another client id", ErrReservedClientID, id, SinkClientPrefix)
	}
	return nil
}

// isSink reports whether id is a sink's client id: sinks are never
// expired, whatever consumers.expire_after says (a sink whose target is
// down for a week must not lose its cursor).
func isSink(id string) bool { return strings.HasPrefix(id, SinkClientPrefix) }

// countOwned counts the client ids owner opened (Open with
// OpenOptions.Owned); the caller holds mu.
func (s *Store) countOwned(owner string) int {
	n := 0
	for _, c := range s.clients {
		if c.owned && c.owner == owner {
			n++
		}
	}
	return n
}

// tooMany is the refusal of owner's client id past the cap.
func (s *Store) tooMany(client, owner string) error {
	who := "anonymous clients have"
	if owner != "" {
		who = fmt.Sprintf("user %s has", owner)
	}
	return fmt.Errorf("%w: client id %q refused: %s %d client ids on this destination already, at most %d (consumers.max_client_ids): reuse one, or drop those no longer used with `braid consumer drop DEST ID`",
		ErrTooManyClients, client, who, s.cfg.MaxClientsPerOwner, s.cfg.MaxClientsPerOwner)
}

// replayShare is how many replay readers one owner may run at once: half
// of Config.MaxReplays (at least one), so that one user behind the store
// cannot take them all and make every other consumer wait.
func (s *Store) replayShare() int { return max(1, s.cfg.MaxReplays/2) }

// shareKey is whose share of the replay readers client draws on: its
// user's when a user opened it, else its own (a sink, a client restored
// from its cursor before its user came back, or any client of a node
// without users, where anyone may do anything and no user is to be
// kept from the others).
func shareKey(client string, c *storeClient) string {
	if c != nil && c.owned && c.owner != "" {
		return "u:" + c.owner
	}
	return "c:" + client
}
