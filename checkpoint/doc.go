// Package checkpoint owns the checkpoint store and its lifecycle: the handshake
// markers, verification, the durable atomic commit, the "latest" pointer,
// retention, the tiered drain and the requeue decisions. It needs no topology.
package checkpoint
