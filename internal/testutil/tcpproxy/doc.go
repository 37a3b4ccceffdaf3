// Package tcpproxy is a TCP proxy for tests that stands in for a virtual
// IP (or a DNS name) in front of a database: clients connect to one
// address, and the test moves what is behind it, as a failover tool
// (orchestrator, MHA, keepalived, a cloud's managed failover) moves a
// virtual IP from a dead primary to a promoted replica.
//
//	p := tcpproxy.Start(t, primary.Addr()) // listens on 127.0.0.1:0
//	// ... point braid at p.Addr() ...
//	primary.Kill(t)
//	p.Switch(replica.Addr())  // cuts every connection, as a VIP move does
//	p.Pause()                 // a black hole: accepted, nothing forwarded
//	p.Resume()
//	st := p.Stats()           // connections accepted, open, cut
//
// Each accepted connection is forwarded to the backend current when it
// was accepted. Switch makes later connections go to the new backend and
// cuts the existing ones (their clients see a reset or an EOF, as they
// do when the address moves to a host that never had the connection);
// SwitchKeep makes later connections go to the new backend and leaves the
// existing ones on the old, as a DNS change does. Cut drops every
// connection without switching (a network blip). A backend that refuses
// the connection closes the client's at once.
//
// Pause makes the proxy a black hole: it still accepts connections (the
// client's connect succeeds, as a SYN to a live host does) but forwards
// no byte in either direction, on new and existing connections, so a
// client sees neither data nor an error until its own read timeout. What
// was sent meanwhile is held, not lost: Resume forwards it, as TCP
// retransmits once a network heals, and lets the held new connections
// reach the backend.
//
// # Invariants
//
//   - Bytes arrive in order and whole on a connection that is not cut;
//     nothing is forwarded while paused.
//   - After Switch returns, no connection to the old backend remains
//     open and every new one goes to the new backend.
//   - Close (or the test's end, for Start) stops the listener and cuts
//     every connection; its goroutines have returned when it returns.
//
// # Concurrency
//
// A Proxy's methods are safe for concurrent use. The proxy owns one
// goroutine accepting connections and two per connection copying bytes;
// Close stops and waits for all of them.
package tcpproxy
