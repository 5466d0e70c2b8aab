package launch

import "net"

// ControlHost chooses where the control server listens (bind) and what the
// shims dial (connect), given the batch node's address as Slurm knows it
// (its NodeAddr, else its name). The server listens on that address only,
// not on every interface:
//
//   - an IP address is used as it is;
//   - a name is resolved here, and its first non-loopback address is both
//     bound and dialled (so the shims reach what was bound, whatever their
//     own resolver says);
//   - a name that resolves to loopback only (Debian's 127.0.1.1 for the
//     host's own name) is bound as such when the job has one node; with
//     several, or when it does not resolve, bind is "" (every interface, as
//     before) and the shims dial the name: the caller warns.
func ControlHost(host string, multiNode bool) (bind, connect string) {
	if ip := net.ParseIP(host); ip != nil {
		return host, host
	}
	addrs, err := net.LookupHost(host)
	if err != nil || len(addrs) == 0 {
		return "", host
	}
	for _, a := range addrs {
		if ip := net.ParseIP(a); ip != nil && !ip.IsLoopback() {
			return a, a
		}
	}
	if !multiNode {
		return addrs[0], host
	}
	return "", host
}
