package chaos

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"
)

// Kind is a kind of fault, by the name the schedule prints.
type Kind string

// The faults a schedule draws from. Node faults name a role (owner,
// leader, follower), resolved to a node when the fault fires.
const (
	KillNode       Kind = "kill"           // SIGKILL a node, start it again after For
	StopNode       Kind = "stop"           // SIGSTOP a node, SIGCONT after For
	RestartNode    Kind = "restart"        // SIGTERM a node, start it again at once
	PartitionNode  Kind = "partition"      // cut a node from the other nodes (not from sources, targets, clients) for For
	RestartSource  Kind = "restart-source" // stop a source's server cleanly, start it again
	KillSource     Kind = "kill-source"    // SIGKILL a source's server, start it again after For
	FailoverSource Kind = "failover"       // SIGKILL a source's primary, promote its replica, move the virtual IP
	CutTarget      Kind = "cut-target"     // a sink's target unreachable (its proxy refuses) for For
	StopBroker     Kind = "stop-target"    // SIGSTOP the Kafka broker, SIGCONT after For
	RestartBroker  Kind = "restart-target" // SIGTERM the Kafka broker, start it again on its data at once
	PauseConsumer  Kind = "pause-consumer" // the native consumer stops reading for For
	AlterShards    Kind = "alter-shards"   // ADD COLUMN on every shard table, one by one
	TruncateShard  Kind = "truncate"       // TRUNCATE one shard table
	Burst          Kind = "burst"          // a large transaction on one source
)

// Roles of the node a node fault hits.
const (
	RoleOwner    = "owner"    // the node that runs the destination
	RoleLeader   = "leader"   // the Raft leader
	RoleFollower = "follower" // a node that is neither
)

// Targets of CutTarget: the sinks' names. The Kafka broker is a kfake
// process of the run's own behind a proxy too (it advertises the
// proxy's address); StopBroker and RestartBroker hit its
// process (not SIGKILL: kfake's recovery of a transaction open at a crash
// writes no abort marker, and read_committed consumers then skip the
// producer's later records in that partition, docs/chaos.md).
var cutTargets = []string{"mysql", "postgres", "redis", "kafka", "rabbitmq"}

// brokerFaults are the faults of the Kafka broker's process.
var brokerFaults = []Kind{StopBroker, RestartBroker}

// Fault is one entry of a schedule.
type Fault struct {
	At     time.Duration // since the faults began
	Kind   Kind
	Target string        // a role, a source (a, b, c), a sink, a shard table
	For    time.Duration // how long it lasts, for faults that end
}

func (f Fault) String() string {
	s := fmt.Sprintf("%8s  %-15s %s", f.At.Round(100*time.Millisecond), f.Kind, f.Target)
	if f.For > 0 {
		s += fmt.Sprintf(" for %v", f.For.Round(100*time.Millisecond))
	}
	return s
}

// Schedule is a run's faults, in order of At.
type Schedule struct {
	Seed     uint64
	Duration time.Duration
	Faults   []Fault
}

func (s Schedule) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d, duration %v, %d faults:\n", s.Seed, s.Duration, len(s.Faults))
	for _, f := range s.Faults {
		b.WriteString("  " + f.String() + "\n")
	}
	return b.String()
}

// Around returns the faults active or begun within window of at.
func (s Schedule) Around(at, window time.Duration) []Fault {
	var out []Fault
	for _, f := range s.Faults {
		if f.At <= at+window && f.At+f.For >= at-window {
			out = append(out, f)
		}
	}
	return out
}

// settle is the time at the end of a run with no fault begun, so that the
// last ones are over before the writer stops.
const settle = 15 * time.Second

// Plan draws a schedule of faults over duration from seed. Faults follow
// one another with a gap of 2–8 s after the previous one ended, so at most
// one node is down at a time (the cluster of three keeps a quorum); the
// schema and write faults (ALTER, TRUNCATE, bursts) may come during a node
// fault, as they would in production. No fault begins in the last
// 15 s.
func Plan(seed uint64, duration time.Duration) Schedule {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s := Schedule{Seed: seed, Duration: duration}
	roles := []string{RoleOwner, RoleLeader, RoleFollower}
	sources := []string{"a", "b", "c"}
	between := func(lo, hi time.Duration) time.Duration {
		return lo + time.Duration(r.Int64N(int64(hi-lo)+1)).Round(100*time.Millisecond)
	}
	at := between(5*time.Second, 10*time.Second)
	for at < duration-settle {
		var f Fault
		switch n := r.IntN(100); {
		case n < 14:
			f = Fault{Kind: KillNode, Target: roles[r.IntN(3)], For: between(2*time.Second, 10*time.Second)}
		case n < 24:
			f = Fault{Kind: StopNode, Target: roles[r.IntN(3)], For: between(2*time.Second, 12*time.Second)}
		case n < 32:
			f = Fault{Kind: RestartNode, Target: roles[r.IntN(3)]}
		case n < 41:
			f = Fault{Kind: PartitionNode, Target: roles[r.IntN(3)], For: between(5*time.Second, 20*time.Second)}
		case n < 47:
			f = Fault{Kind: RestartSource, Target: sources[r.IntN(3)]}
		case n < 52:
			f = Fault{Kind: KillSource, Target: sources[r.IntN(3)], For: between(time.Second, 5*time.Second)}
		case n < 59:
			f = Fault{Kind: FailoverSource, Target: sources[r.IntN(3)]}
		case n < 65:
			f = Fault{Kind: CutTarget, Target: cutTargets[r.IntN(len(cutTargets))], For: between(2*time.Second, 10*time.Second)}
		case n < 70:
			f = Fault{Kind: brokerFaults[r.IntN(len(brokerFaults))], Target: "kafka", For: between(2*time.Second, 10*time.Second)}
			if f.Kind == RestartBroker {
				f.For = 0
			}
		case n < 75:
			f = Fault{Kind: PauseConsumer, Target: "native", For: between(5*time.Second, 20*time.Second)}
		case n < 82:
			f = Fault{Kind: AlterShards, Target: "shop_*.orders"}
		case n < 88:
			f = Fault{Kind: TruncateShard, Target: fmt.Sprintf("shop_%d.orders", r.IntN(6))}
		default:
			f = Fault{Kind: Burst, Target: sources[r.IntN(3)]}
		}
		f.At = at
		s.Faults = append(s.Faults, f)
		switch f.Kind {
		case AlterShards, TruncateShard, Burst, PauseConsumer, CutTarget:
			at += between(2*time.Second, 6*time.Second) // beside whatever comes next
		default:
			at += f.For + between(2*time.Second, 8*time.Second)
		}
	}
	return s
}
