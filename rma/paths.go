package rma

import (
	"fmt"
	"math/bits"

	"github.com/goarmci/goarmci/hybridft"
	"github.com/goarmci/goarmci/internal/config"
)

// Several paths per rail ([Vishnu07 §2.2, ch. 7]: LMC gives a port 2^LMC LIDs, and a
// destination-routed fabric sends each LID of a destination through its own route, so a pair of
// ranks has several paths through the network on one rail). With Config.Paths = P (GOARMCI_PATHS)
// every network peer's channel has rails × P subchannels, rail-major: subchannel r·P + b is an
// RC queue pair on rail r+1 with path bits b, whose address vector names the peer port's base
// LID + b and source path bits b, so requests and their responses both take path b. The
// striping policy (Config.StripePolicy) spreads operations over all of them: adaptive striping
// over paths is HSAM [Vishnu07 ch. 7], BSS over a batch of them ch. 8.
//
// On the tcp provider every port is opened with LMC ⌈log2 P⌉ and each (DLID, source path bits)
// pair to a destination is a TCP stream of its own (ibv/provider/tcp), so P paths are P streams
// per rail and peer: on one Ethernet link they share the link, and the kernel's flow hashing
// (ECMP, bonding) may spread them over links. A device given by Config.NetworkDevice must have
// ports of LMC ≥ ⌈log2 P⌉ (ibv/fabric: Config.LMC), else Init fails (ErrConfig). Every rank must
// use the same P (Init checks it).

// lmcFor is the LMC that gives a port at least paths LIDs.
func lmcFor(paths int) uint8 {
	if paths <= 1 {
		return 0
	}
	return uint8(bits.Len(uint(paths - 1)))
}

// checkPaths fills in Config.Paths (0: env, the value of GOARMCI_PATHS) and validates it.
// Errors wrap ErrConfig.
func (c *Config) checkPaths(env int) error {
	if c.Paths == 0 {
		c.Paths = env
	}
	if c.Paths == 0 {
		c.Paths = 1
	}
	if c.Paths < 1 || c.Paths > config.MaxPaths {
		return fmt.Errorf("%w: %d paths per rail (want 1..%d)", ErrConfig, c.Paths, config.MaxPaths)
	}
	return nil
}

// pathEndpoints returns the endpoints of a network's subchannels: for every port (rail) of ep's
// device, Config.Paths endpoints with path bits 0..Paths-1 (rail-major). Errors wrap ErrConfig:
// a port whose LMC gives fewer LIDs than paths.
func (r *Runtime) pathEndpoints(ep *hybridft.Endpoint) ([]*hybridft.Endpoint, error) {
	paths := max(r.cfg.Paths, 1)
	var eps []*hybridft.Endpoint
	for p := 1; p <= ep.Dev.QueryDevice().PhysPortCnt; p++ {
		port := ep.WithPort(uint8(p))
		if paths > 1 {
			pa, err := ep.Dev.QueryPort(uint8(p))
			if err != nil {
				return nil, err
			}
			if 1<<pa.LMC < paths {
				return nil, fmt.Errorf("%w: %d paths per rail (GOARMCI_PATHS) need LMC %d on every port, port %d of %s has LMC %d",
					ErrConfig, paths, lmcFor(paths), p, ep.Dev.QueryDevice().Name, pa.LMC)
			}
		}
		for b := 0; b < paths; b++ {
			eps = append(eps, port.WithPath(uint8(b)))
		}
	}
	return eps, nil
}
