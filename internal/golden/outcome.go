package golden

import (
	"strings"

	"go.opentelemetry.io/collector/pdata/pcommon"
)

// Validation outcome attributes: every record that passed a validating component
// says whether it honours the contract, and if not, why.
const (
	// ValidAttr is a bool: true when the record carries every required field with a valid value.
	ValidAttr = "golden.valid"
	// MissingAttr lists the required fields the record lacks.
	MissingAttr = "golden.missing"
	// InvalidAttr lists the fields whose values break their format or type, and the
	// custom rules (as "rule:<name>") the record breaks.
	InvalidAttr = "golden.invalid"
	// DerivedAttr lists the golden fields a record did not carry and was
	// given from its request's other records (reqidstitch).
	DerivedAttr = "golden.derived"
	// ConflictsAttr lists the alias values a record carried that lost to a
	// different value of the same golden field (goldenfield), one string
	// each: "<golden field> <alias>=<value>", e.g. "req_id inference_id=b".
	ConflictsAttr = "golden.conflicts"
)

// IsOutcomeAttr reports whether k is one of the validation outcome attributes,
// a record's schema drift mark, its list of derived fields or its alias
// conflicts, which describe a record rather than belong to it.
func IsOutcomeAttr(k string) bool {
	return k == ValidAttr || k == MissingAttr || k == InvalidAttr || k == DerivedAttr || k == ConflictsAttr || k == DriftFieldsLost || k == DriftOldModelVer
}

// Schema drift events: a log record with event name SchemaDriftEvent reports that
// records of a new model_ver stopped carrying fields that the previous version's carried.
const (
	SchemaDriftEvent = "schema.drift"

	DriftSignal       = "schema.drift.signal"
	DriftOldModelVer  = "schema.drift.old_model_ver"
	DriftNewModelVer  = "schema.drift.new_model_ver"
	DriftFieldsLost   = "schema.drift.fields_lost"
	DriftFieldsGained = "schema.drift.fields_gained"
	// DriftRates maps each lost or gained field to {"old": rate, "new": rate}.
	DriftRates      = "schema.drift.rates"
	DriftFirstSeen  = "schema.drift.first_seen"
	DriftOldRecords = "schema.drift.old_records"
	DriftNewRecords = "schema.drift.new_records"
)

// A record of a drifted model_ver that lacks fields its predecessor's records
// nearly always carried is marked with DriftFieldsLost (the fields it lacks)
// and DriftOldModelVer: it is evidence that its request failed (failure.KindSchemaDrift).

// Filled records that a later component gave the record a required field it
// lacked (reqidstitch filling req_id): the field leaves golden.missing, and
// the record becomes valid when nothing else is missing or invalid, so that
// the validation outcome is true of the record as it leaves the collector.
// A record no validating component saw (without golden.valid) is left alone.
func Filled(attrs pcommon.Map, field string) {
	if _, validated := attrs.Get(ValidAttr); !validated {
		return
	}
	if missing, ok := attrs.Get(MissingAttr); ok && missing.Type() == pcommon.ValueTypeSlice {
		missing.Slice().RemoveIf(func(v pcommon.Value) bool { return v.Str() == field })
		if missing.Slice().Len() == 0 {
			attrs.Remove(MissingAttr)
		}
	}
	_, stillMissing := attrs.Get(MissingAttr)
	_, invalid := attrs.Get(InvalidAttr)
	attrs.PutBool(ValidAttr, !stillMissing && !invalid)
}

// The failure verdict on a request's records (internal/failure writes and reads them).
const (
	RequestFailed         = "request.failed"
	RequestFailureReasons = "request.failure.reasons"
)

// IsLoomAttr reports whether Loom's own components wrote k (identity,
// stitching, causal edges, validation, sampling, the failure verdict, schema
// drift marks): it describes how a record was read, never what the service
// did.
func IsLoomAttr(k string) bool {
	switch k {
	case EventID, CausalParents, CausalRules, StitchDetached, StitchAsyncOf, RequestFailed, RequestFailureReasons:
		return true
	}
	return strings.HasPrefix(k, "golden.") || strings.HasPrefix(k, "sampling.") || strings.HasPrefix(k, "schema.drift")
}
