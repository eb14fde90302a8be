package lokiexporter

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/collector/consumer/consumererror"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
)

// Reasons for a permanent rejection: Loki's own reason names where its
// documentation gives one (troubleshooting: log ingestion), so they line up
// with loki_discarded_samples_total{reason}.
const (
	reasonDuplicateLabelNames = "duplicate_label_names"
	reasonTooOld              = "greater_than_max_sample_age"
	reasonInvalidLabels       = "invalid_labels"
	reasonLabelNameTooLong    = "label_name_too_long"
	reasonLabelValueTooLong   = "label_value_too_long"
	reasonLineTooLong         = "line_too_long"
	reasonMaxLabelNames       = "max_label_names_per_series"
	reasonMissingLabels       = "missing_labels"
	reasonOther               = "other"
	reasonRequestBodyTooLarge = "request_body_too_large"
	reasonStructuredMetadata  = "structured_metadata"
	reasonTooFarBehind        = "too_far_behind"
	reasonTooFarInFuture      = "too_far_in_future"
	reasonUnauthorized        = "unauthorized"
)

// reasonMessages maps a fragment of each documented 400 message (lower case) to its reason.
var reasonMessages = []struct{ fragment, reason string }{
	{"max entry size", reasonLineTooLong},
	{"error parsing labels", reasonInvalidLabels},
	{"at least one label pair is required", reasonMissingLabels},
	{"entry too far behind", reasonTooFarBehind},
	{"entry out of order", reasonTooFarBehind},
	{"timestamp too old", reasonTooOld},
	{"timestamp too new", reasonTooFarInFuture},
	{"label names; limit", reasonMaxLabelNames},
	{"label name too long", reasonLabelNameTooLong},
	{"label value too long", reasonLabelValueTooLong},
	{"duplicate label name", reasonDuplicateLabelNames},
	{"structured metadata", reasonStructuredMetadata},
}

// rejectReasons returns the distinct reasons named in a 400 body, in order of
// first appearance; Loki writes one line per rejected entry.
func rejectReasons(body string) []string {
	var reasons []string
	for line := range strings.Lines(strings.ToLower(body)) {
		reason := reasonOther
		for _, m := range reasonMessages {
			if strings.Contains(line, m.fragment) {
				reason = m.reason
				break
			}
		}
		// Loki ends a 400 body with "user=…, total ignored: N out of M": not a reason of its own.
		if reason == reasonOther && strings.Contains(line, "total ignored") {
			continue
		}
		if !slices.Contains(reasons, reason) {
			reasons = append(reasons, reason)
		}
	}
	if len(reasons) == 0 {
		reasons = []string{reasonOther}
	}
	return reasons
}

// classify turns a non-2xx push response into the rejection reasons to count
// when the error is permanent, and the error exporterhelper acts on:
//   - 429 and 5xx are retried, after Retry-After when the response has one;
//   - 400 (Loki's validation errors), 401/403 (no or wrong tenant), 413 and
//     any other status are permanent: resending the same push cannot succeed.
func classify(status int, header http.Header, body string, now time.Time) (reasons []string, err error) {
	err = fmt.Errorf("loki responded %d %s: %s", status, http.StatusText(status), abbreviate(strings.TrimSpace(body)))
	switch {
	case status == http.StatusTooManyRequests || status >= 500:
		if delay, ok := retryAfter(header.Get("Retry-After"), now); ok {
			return nil, exporterhelper.NewThrottleRetry(err, delay)
		}
		return nil, err
	case status == http.StatusBadRequest:
		return rejectReasons(body), consumererror.NewPermanent(err)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return []string{reasonUnauthorized}, consumererror.NewPermanent(fmt.Errorf("%w (Loki wants a tenant it accepts: set tenant::default or tenant::from_attribute, or configure auth)", err))
	case status == http.StatusRequestEntityTooLarge:
		return []string{reasonRequestBodyTooLarge}, consumererror.NewPermanent(fmt.Errorf("%w (lower sending_queue::batch::max_size)", err))
	default:
		return []string{reasonOther}, consumererror.NewPermanent(err)
	}
}

// retryAfter parses a Retry-After value: delay seconds or an HTTP date.
func retryAfter(value string, now time.Time) (time.Duration, bool) {
	if value == "" {
		return 0, false
	}
	if seconds, err := strconv.Atoi(value); err == nil && seconds >= 0 {
		return time.Duration(seconds) * time.Second, true
	}
	if at, err := http.ParseTime(value); err == nil {
		return max(at.Sub(now), 0), true
	}
	return 0, false
}

// abbreviate keeps error messages readable when Loki lists many rejected entries.
func abbreviate(s string) string {
	const limit = 512
	if len(s) <= limit {
		return s
	}
	return s[:limit] + "…"
}

var errNotStarted = errors.New("loki exporter not started")
