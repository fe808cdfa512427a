//go:build !amd64 || race

package accum

import "sync/atomic"

// storeRelease64 stores v at *p atomically (sync/atomic: at least release ordering; the race
// detector sees it).
func storeRelease64(p *uint64, v uint64) { atomic.StoreUint64(p, v) }
