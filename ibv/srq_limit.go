package ibv

import "fmt"

// SRQLimiter is implemented by an SRQDriver that supports the SRQ limit (ibv_modify_srq with
// IBV_SRQ_LIMIT): ArmLimit arms it at limit receives (0 disarms); when a receive taken from the
// SRQ leaves fewer than limit posted, the driver posts one EventSRQLimitReached for the SRQ
// (provider.PostEvent) and disarms the limit.
type SRQLimiter interface {
	ArmLimit(limit int) error
}

// ArmLimit arms the SRQ's low watermark at limit receives (ibv_modify_srq, IBV_SRQ_LIMIT;
// 0 disarms): one EventSRQLimitReached is posted on the device when the receives posted to the
// SRQ fall below limit, after which the limit is disarmed until armed again — the signal a
// consumer that keeps few receives posted uses to post more [Sridhar08]. ErrInvalidArgument for
// a limit below 0 or above the SRQ's capacity (nothing changes), ErrUnsupported when the
// provider has no SRQ limit.
func (s *SRQ) ArmLimit(limit int) error {
	l, ok := s.drv.(SRQLimiter)
	if !ok {
		return fmt.Errorf("ibv: SRQ limit: %w", ErrUnsupported)
	}
	if limit < 0 {
		return fmt.Errorf("%w: SRQ limit %d", ErrInvalidArgument, limit)
	}
	return l.ArmLimit(limit)
}

// PD is the protection domain the SRQ was created in.
func (s *SRQ) PD() *PD { return s.pd }
