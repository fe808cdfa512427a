// Package apm is the pure core of Hardware-IBNFT ([Vishnu07 ch. 9], [Vishnu09 §IV.A]): the alternate
// path specification module's choice of an alternate path, and the decision to give a recovered
// home path back by manual migration. The driver (package hybridft) loads the chosen path with
// a path loading request (Modify RTS→RTS, AttrAltPath, PathMigState REARM; the provider probes
// the path and moves the queue pair to ARMED), reacts to the path-migrated event by choosing
// and loading a new alternate, and migrates manually (ARMED→MIGRATED) for load balancing or to
// give the home path back. Nothing here starts a goroutine or reads a clock.
package apm

// Path names a path of a queue pair: the local port (rail, 1-based) and the source path bits
// (the LMC offset of the destination LID, [Vishnu07 §2.2]).
type Path struct {
	Port     uint8
	PathBits uint8
}

// Ports describes the ports a connection may use: N ports on both sides, Up the bit mask of
// those up (bit p-1 for port p), LMC the path-bit width of each port (index p-1; nil: 0).
type Ports struct {
	N   uint8
	Up  uint32
	LMC []uint8
}

func (ps Ports) up(p uint8) bool { return p >= 1 && p <= ps.N && ps.Up&(1<<(p-1)) != 0 }

func (ps Ports) lmc(p uint8) uint8 {
	if int(p) <= len(ps.LMC) && p >= 1 {
		return ps.LMC[p-1]
	}
	return 0
}

// Alternate returns the alternate path for a queue pair whose home path is home and whose
// primary path now is primary ([Vishnu07 §9.2.1]: the other port of the adapter when it is
// available, else other path bits on the same port; [Vishnu09 §IV.A]: consecutive path IDs in
// round-robin order):
//   - the home path, when the primary is not home and the home port is up (so that a recovered
//     path is loaded and can be given back);
//   - else the next port after the primary's, round robin, that is up;
//   - else, when the primary port has LMC > 0, the next path bits on it;
//
// ok is false when no alternate path exists.
func Alternate(home, primary Path, ps Ports) (Path, bool) {
	if primary != home && ps.up(home.Port) {
		return home, true
	}
	for i := uint8(1); i < ps.N; i++ {
		p := (primary.Port-1+i)%ps.N + 1
		if ps.up(p) {
			return Path{Port: p}, true
		}
	}
	if l := ps.lmc(primary.Port); l > 0 {
		return Path{Port: primary.Port, PathBits: (primary.PathBits + 1) & (1<<l - 1)}, true
	}
	return Path{}, false
}

// GiveBack reports whether a queue pair whose primary path is primary and whose ARMED alternate
// is alt should migrate manually now to give its home path back ([Vishnu07 §9.2.3]: manual
// migration, here to restore the striping over the rails once a failed rail recovered).
func GiveBack(home, primary, alt Path, armed bool) bool {
	return armed && primary != home && alt == home
}
