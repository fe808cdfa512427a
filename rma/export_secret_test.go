package rma

import "github.com/goarmci/goarmci/hybridft"

// Ports returns this rank's tcp port addresses, and its UD connection manager's addresses and
// queue pair number (nil, nil, 0 without a network).
func (r *Runtime) Ports() (tcpAddrs, cmAddrs []string, cmQPN uint32) {
	for _, nw := range r.nets {
		if nw.kind != TransportTCP {
			continue
		}
		for p := 1; p <= nw.dev.QueryDevice().PhysPortCnt; p++ {
			if pa, err := nw.dev.QueryPort(uint8(p)); err == nil {
				tcpAddrs = append(tcpAddrs, pa.Addr)
			}
		}
		if nw.mgr != nil {
			cmAddrs, cmQPN = nw.mgr.CM().Addrs(), nw.mgr.CM().QPN()
		}
	}
	return tcpAddrs, cmAddrs, cmQPN
}

// NetConn is the first rail's connection to network peer proc (nil if none).
func (r *Runtime) NetConn(proc int) *hybridft.Conn {
	pe := r.peers[proc]
	if pe.ch.Load() == nil {
		return nil
	}
	return pe.ch.Load().Subchannels()[0]
}

// RemoteKey is proc's part of s as this rank's network reaches it: address and rkey.
func (s *Segment) RemoteKey(proc int) (addr uint64, rkey uint32) {
	pe := s.rt.peers[proc]
	return s.remote[proc].addr, s.remote[proc].rkeys[pe.net]
}
