package raftstore

import (
	"encoding/json"
	"fmt"

	"github.com/braid-cdc/braid/engine/change"
)

// cmdVersion is the first byte of every command in the log. A node that
// reads another version refuses the entry (ErrBadCommand) instead of
// guessing; a new version may only be written once every node reads it.
const cmdVersion = 1

// cmdType is the second byte of a command.
type cmdType byte

const (
	cmdCreateDest   cmdType = 1 // dest, spec (canonical YAML)
	cmdUpdateDest   cmdType = 2 // dest, spec
	cmdDeleteDest   cmdType = 3 // dest
	cmdAssign       cmdType = 4 // dest, owner, conditional, ifEpoch
	cmdSaveCursors  cmdType = 5 // dest, epoch, schemas, cursors
	cmdSaveDecision cmdType = 6 // dest, epoch, lock, action, afterSeq, taken
	cmdSaveChunk    cmdType = 7 // dest, epoch, chunk (JSON)
)

func (t cmdType) String() string {
	switch t {
	case cmdCreateDest:
		return "create-destination"
	case cmdUpdateDest:
		return "update-destination"
	case cmdDeleteDest:
		return "delete-destination"
	case cmdAssign:
		return "assign"
	case cmdSaveCursors:
		return "save-cursors"
	case cmdSaveDecision:
		return "save-decision"
	case cmdSaveChunk:
		return "save-chunk"
	}
	return fmt.Sprintf("command-%d", byte(t))
}

// command is every command's fields; which are used depends on Type.
//
// The encoding is: version byte, type byte, then the type's fields in the
// order listed above, each a uvarint, a zigzag varint (LastKey, lock), a
// byte (booleans) or a uvarint length followed by bytes (strings). A
// cursor update of one client on two sources takes about 60 bytes; a
// decision about 20 plus the destination's name.
type command struct {
	Type  cmdType
	Dest  string
	Spec  []byte // create, update: the spec as canonical YAML
	Owner string // assign: node id, "" to unassign
	// Conditional assign: applies only if the current epoch is IfEpoch.
	Conditional bool
	IfEpoch     uint64
	Epoch       uint64       // save-cursors, save-decision: the writer's epoch
	Schemas     []schemaBlob // save-cursors: schema histories the cursors name
	Cursors     []cursorEntry
	Decision    decisionRecord // save-decision: the decision appended
	Chunk       chunkRecord    // save-chunk: the snapshot chunk appended
}

// schemaBlob is one schema history (an change.SchemaSnapshot as JSON) of a
// source, named by its hash.
type schemaBlob struct {
	Source string
	Hash   string
	Data   []byte
}

// cursorEntry sets (or, with Delete, removes) one client's cursor.
type cursorEntry struct {
	Client string
	Delete bool
	Cursor cursorRecord
}

// cursorRecord is a group.Cursor as stored: the schema histories are
// replaced by their hashes.
type cursorRecord struct {
	Seq     uint64         `json:"seq"`
	Sources []sourceRecord `json:"sources"`
	// Taken and ShardDDL (group.ShardDDLState as JSON) are the cursor's
	// shard-DDL merge point and state. In a save-cursors entry they come
	// after every cursor (see encode), so entries written before them
	// still read.
	Taken    uint64          `json:"taken,omitempty"`
	ShardDDL json.RawMessage `json:"shardDDL,omitempty"`
	// Detached is group.Cursor.Detached, written the same way.
	Detached bool `json:"detached,omitempty"`
	// Snapshots are the sources' snapshot progress
	// (change.SnapshotState as JSON, empty for none), written after the
	// shard-DDL part the same way.
	Snapshots []json.RawMessage `json:"snapshots,omitempty"`
}

type sourceRecord struct {
	Name    string `json:"name"`
	File    string `json:"file"`
	Pos     uint32 `json:"pos"`
	LastKey int64  `json:"lastKey"`
	Schema  string `json:"schema,omitempty"` // hash of the schema history, "" for none
	// GTIDs (change.GTIDState's text) and Server are the source's GTID
	// state at Pos and the server Pos is in: a new owner that finds
	// another server at the source's address (a failover behind it)
	// resumes there by GTID, never at a foreign file:pos. Written after
	// the snapshot part of a save-cursors entry, the same way.
	GTIDs  string         `json:"gtids,omitempty"`
	Server *change.Server `json:"server,omitempty"`
}

func (c *command) encode() []byte {
	e := newEncoder(64)
	e.header(c.Type)
	e.str(c.Dest)
	switch c.Type {
	case cmdCreateDest, cmdUpdateDest:
		e.bytes(c.Spec)
	case cmdDeleteDest:
	case cmdAssign:
		e.str(c.Owner)
		e.boolean(c.Conditional)
		e.uvarint(c.IfEpoch)
	case cmdSaveCursors:
		e.uvarint(c.Epoch)
		e.count(len(c.Schemas))
		for _, s := range c.Schemas {
			e.str(s.Source)
			e.str(s.Hash)
			e.bytes(s.Data)
		}
		e.count(len(c.Cursors))
		for _, ce := range c.Cursors {
			e.str(ce.Client)
			e.boolean(ce.Delete)
			if ce.Delete {
				continue
			}
			e.uvarint(ce.Cursor.Seq)
			e.count(len(ce.Cursor.Sources))
			for _, s := range ce.Cursor.Sources {
				e.str(s.Name)
				e.str(s.File)
				e.uvarint(uint64(s.Pos))
				e.varint(s.LastKey)
				e.str(s.Schema)
			}
		}
		// The shard-DDL part of each cursor, after all of them: an entry
		// written before it existed ends above.
		for _, ce := range c.Cursors {
			if !ce.Delete {
				e.uvarint(ce.Cursor.Taken)
				e.bytes(ce.Cursor.ShardDDL)
				e.boolean(ce.Cursor.Detached)
			}
		}
		// The snapshot progress of each cursor's sources, after that.
		for _, ce := range c.Cursors {
			if !ce.Delete {
				e.count(len(ce.Cursor.Snapshots))
				for _, b := range ce.Cursor.Snapshots {
					e.bytes(b)
				}
			}
		}
		// The GTID state and server of each cursor's sources, after
		// that: a string, then a flag and the server's fields.
		for _, ce := range c.Cursors {
			if !ce.Delete {
				for _, s := range ce.Cursor.Sources {
					e.str(s.GTIDs)
					e.boolean(s.Server != nil)
					if s.Server != nil {
						e.uvarint(uint64(s.Server.ID))
						e.str(s.Server.UUID)
						e.str(s.Server.Host)
						e.str(s.Server.Binlog)
					}
				}
			}
		}
	case cmdSaveDecision:
		e.uvarint(c.Epoch)
		e.varint(c.Decision.Lock)
		e.str(c.Decision.Action)
		e.uvarint(c.Decision.AfterSeq)
		e.uvarint(c.Decision.Taken)
	case cmdSaveChunk:
		e.uvarint(c.Epoch)
		b, _ := json.Marshal(c.Chunk) // plain fields: cannot fail
		e.bytes(b)
	}
	return e.bytesOut()
}

// decodeCommand parses an encoded command. Bad input is an error wrapping
// ErrBadCommand, never a panic.
func decodeCommand(data []byte) (*command, error) {
	if len(data) < 2 {
		return nil, failf(codeBadCommand, "%d bytes", len(data))
	}
	if data[0] != cmdVersion {
		return nil, failf(codeBadCommand, "version %d (this node reads version %d)", data[0], cmdVersion)
	}
	c := &command{Type: cmdType(data[1])}
	d := &decoder{b: data[2:]}
	c.Dest = d.str()
	switch c.Type {
	case cmdCreateDest, cmdUpdateDest:
		c.Spec = d.bytes()
	case cmdDeleteDest:
	case cmdAssign:
		c.Owner = d.str()
		c.Conditional = d.boolean()
		c.IfEpoch = d.uvarint()
	case cmdSaveCursors:
		c.Epoch = d.uvarint()
		c.Schemas = make([]schemaBlob, d.count())
		for i := range c.Schemas {
			c.Schemas[i] = schemaBlob{Source: d.str(), Hash: d.str(), Data: d.bytes()}
		}
		c.Cursors = make([]cursorEntry, d.count())
		for i := range c.Cursors {
			ce := &c.Cursors[i]
			ce.Client = d.str()
			if ce.Delete = d.boolean(); ce.Delete {
				continue
			}
			ce.Cursor.Seq = d.uvarint()
			ce.Cursor.Sources = make([]sourceRecord, d.count())
			for j := range ce.Cursor.Sources {
				s := &ce.Cursor.Sources[j]
				s.Name = d.str()
				s.File = d.str()
				pos := d.uvarint()
				if pos > 1<<32-1 {
					d.fail(fmt.Errorf("position %d out of range", pos))
				}
				s.Pos = uint32(pos)
				s.LastKey = d.varint()
				s.Schema = d.str()
			}
		}
		if len(d.b) > 0 {
			for i := range c.Cursors {
				if ce := &c.Cursors[i]; !ce.Delete {
					ce.Cursor.Taken = d.uvarint()
					if b := d.bytes(); len(b) > 0 {
						ce.Cursor.ShardDDL = b
					}
					ce.Cursor.Detached = d.boolean()
				}
			}
		}
		if len(d.b) > 0 {
			for i := range c.Cursors {
				if ce := &c.Cursors[i]; !ce.Delete {
					if n := d.count(); n > 0 {
						ce.Cursor.Snapshots = make([]json.RawMessage, n)
						for j := range ce.Cursor.Snapshots {
							if b := d.bytes(); len(b) > 0 {
								ce.Cursor.Snapshots[j] = b
							}
						}
					}
				}
			}
		}
		if len(d.b) > 0 {
			for i := range c.Cursors {
				if ce := &c.Cursors[i]; !ce.Delete {
					for j := range ce.Cursor.Sources {
						s := &ce.Cursor.Sources[j]
						s.GTIDs = d.str()
						if d.boolean() {
							id := d.uvarint()
							if id > 1<<32-1 {
								d.fail(fmt.Errorf("server_id %d out of range", id))
							}
							s.Server = &change.Server{ID: uint32(id), UUID: d.str(), Host: d.str(), Binlog: d.str()}
						}
					}
				}
			}
		}
	case cmdSaveDecision:
		c.Epoch = d.uvarint()
		c.Decision = decisionRecord{Lock: d.varint(), Action: d.str(), AfterSeq: d.uvarint(), Taken: d.uvarint()}
	case cmdSaveChunk:
		c.Epoch = d.uvarint()
		if err := json.Unmarshal(d.bytes(), &c.Chunk); err != nil {
			d.fail(fmt.Errorf("snapshot chunk: %w", err))
		}
	default:
		return nil, failf(codeBadCommand, "unknown type %d", byte(c.Type))
	}
	if err := d.done(); err != nil {
		return nil, failf(codeBadCommand, "%s: %v", c.Type, err)
	}
	return c, nil
}
