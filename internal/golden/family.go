package golden

import "regexp"

// versionSuffix is a model name's trailing version: "-v2.1.4", "-v0.1",
// "-v2", "@1.3.0", ":2.0-rc1", "-2024-08-06".
var versionSuffix = regexp.MustCompile(`(?i)^(.+?)(?:[-_@:]v\d+(?:\.\d+)*(?:[-.+][0-9a-z]+)*|[-_@:]\d+(?:\.\d+)+(?:[-.+][0-9a-z]+)*|[-_]\d{4}-?\d{2}-?\d{2})$`)

// ModelFamily is a model_ver without its version: "llama3-8b-v2.1.4" →
// "llama3-8b", "sdxl-turbo-v1.0" → "sdxl-turbo". A name with no version is
// its own family. Versions of one family succeed each other; two families
// are two models, never a version change.
func ModelFamily(modelVer string) string {
	if m := versionSuffix.FindStringSubmatch(modelVer); m != nil {
		return m[1]
	}
	return modelVer
}
