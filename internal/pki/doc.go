// Package pki makes and loads the certificates and keys that authenticate a
// cluster's nodes to each other, and the key that encrypts their gossip.
//
// A cluster has one CA (InitCA), kept in a directory the operator controls;
// each node gets a certificate the CA signed, whose CommonName is the
// node's name (IssueNode). Every node loads the CA certificate and its own
// pair into one *tls.Config (LoadNodeTLS) that it uses both to accept
// and to dial other nodes, so each side of a node-to-node connection proves
// itself to the other. The gossip key is 32 random bytes in base64
// (NewGossipKey, LoadGossipKey), the same file on every node. LoadServerTLS
// is the plain server side for the HTTP API, whose clients are not nodes.
//
// Files in a directory made by InitCA and IssueNode:
//
//	ca.pem          the CA certificate, given to every node
//	ca-key.pem      the CA's private key: only IssueNode needs it
//	NAME.pem        node NAME's certificate
//	NAME-key.pem    node NAME's private key
//
// # Invariants
//
//   - Private keys are written with mode 0600, whatever the umask, and
//     no key appears in an error.
//   - InitCA never overwrites a CA: if ca.pem or ca-key.pem exists it
//     fails and leaves both as they were. Replacing a CA would cut every
//     node already issued from the cluster.
//   - IssueNode writes no file but a node's own two: it refuses the name
//     "ca" and names ending in "-key", whose files would be the CA's or
//     another node's.
//   - The config LoadNodeTLS returns completes no handshake, as server or
//     as client, with a peer that shows no certificate or one that does not
//     chain to the CA. It does not check the peer's host name (see
//     LoadNodeTLS for why); who the peer is comes from PeerName.
//   - The Load functions check what they load before a node starts: a pair
//     whose key does not match, a certificate the CA did not sign or one
//     out of its validity period is an error naming the file, not a
//     handshake failure later.
//
// # Concurrency
//
// Every function is safe to call from several goroutines, and a returned
// *tls.Config may be shared by any number of connections. Two processes
// writing the same directory at once are not coordinated beyond InitCA's
// exclusive create.
package pki
