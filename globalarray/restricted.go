package globalarray

import "fmt"

// Restricted keeps the array's data on the listed ranks only (GA_Set_restricted): the
// distribution the other options ask for is computed over len(ranks) processes, and process p's
// block(s) go to ranks[p]; the other ranks own nothing but may call everything. The ranks are
// ranks of the array's group (World or OnGroup's), each at most once. Ghost cells are not
// supported on a restricted array (ErrUnsupportedDistribution).
func Restricted(ranks ...int) Option {
	r := append([]int{}, ranks...)
	if r == nil {
		r = []int{} // listed, empty: refused at Create
	}
	return func(o *options) { o.layout.restricted, o.layout.ranks = true, r }
}

// RestrictedRange is Restricted to the ranks lo..hi inclusive (GA_Set_restricted_range);
// hi < lo lists none (ErrMap at Create).
func RestrictedRange(lo, hi int) Option {
	return func(o *options) { o.layout.restricted, o.layout.ranks, o.layout.rlo, o.layout.rhi = true, nil, lo, hi }
}

// restrictList returns the restricted list over nproc ranks (Restricted's, or RestrictedRange's
// expanded).
func (l *layoutOptions) restrictList(nproc int) ([]int, error) {
	if l.ranks == nil {
		if l.rlo < 0 || l.rhi >= nproc || l.rlo > l.rhi {
			return nil, fmt.Errorf("%w: restricted range %d..%d of %d ranks", ErrMap, l.rlo, l.rhi, nproc)
		}
		for r := l.rlo; r <= l.rhi; r++ {
			l.ranks = append(l.ranks, r)
		}
	}
	if len(l.ranks) == 0 || len(l.ranks) > nproc {
		return nil, fmt.Errorf("%w: a restricted list of %d ranks out of %d", ErrMap, len(l.ranks), nproc)
	}
	return l.ranks, nil
}
