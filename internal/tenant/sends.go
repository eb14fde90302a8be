package tenant

import (
	"errors"
	"fmt"
	"sync"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.uber.org/zap"
)

// Sends is the outcome of sending one batch as one request per tenant.
type Sends struct {
	failed    map[string]bool // tenants whose send may succeed when retried
	retryable []error
	permanent []error
}

// Send calls send for each tenant, at most maxConcurrent at a time (each
// tenant's request is independent), and collects the outcomes.
func Send(tenants []string, maxConcurrent int, send func(tenant string) error) *Sends {
	errs := make([]error, len(tenants))
	if len(tenants) == 1 || maxConcurrent <= 1 {
		for i, id := range tenants {
			errs[i] = send(id)
		}
	} else {
		slots := make(chan struct{}, maxConcurrent)
		var wg sync.WaitGroup
		for i, id := range tenants {
			slots <- struct{}{}
			wg.Go(func() {
				defer func() { <-slots }()
				errs[i] = send(id)
			})
		}
		wg.Wait()
	}
	s := &Sends{}
	for i, id := range tenants {
		s.record(id, errs[i])
	}
	return s
}

func (s *Sends) record(tenant string, err error) {
	switch {
	case err == nil:
	case consumererror.IsPermanent(err):
		s.permanent = append(s.permanent, fmt.Errorf("tenant %q: %w", tenant, err))
	default:
		if s.failed == nil {
			s.failed = map[string]bool{}
		}
		s.failed[tenant] = true
		s.retryable = append(s.retryable, fmt.Errorf("tenant %q: %w", tenant, err))
	}
}

// Err is the batch's error for exporterhelper: nil when every tenant succeeded,
// permanent when no tenant can succeed on retry, else retry(err, failed): the
// retryable errors with just the failed tenants' data (consumererror.NewLogs or
// NewTraces), so a retry does not resend what other tenants accepted.
// Permanent failures beside retryable ones are logged, since exporterhelper
// only sees the retryable error.
func (s *Sends) Err(logger *zap.Logger, retry func(err error, failed map[string]bool) error) error {
	if len(s.retryable) == 0 {
		return errors.Join(s.permanent...)
	}
	if len(s.permanent) > 0 {
		logger.Error("Permanent failure for some tenants; the others will be retried", zap.Error(errors.Join(s.permanent...)))
	}
	return retry(errors.Join(s.retryable...), s.failed)
}
