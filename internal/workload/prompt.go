package workload

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/loom-otel/loom/internal/golden"
)

// slowInputPrefix is the input_hash prefix of the emoji-heavy input family of S2.
const slowInputPrefix = "f7"

// prompt is a synthetic user input (never real user text).
type prompt struct {
	text   string
	hash   string // golden.HashInput(text)
	tokens int    // input tokens after tokenization
	code   bool   // contains code: preproc calls code_syntax_analyzer
}

var (
	promptTasks = []string{
		"Summarize", "Translate to French", "Explain to a new engineer", "Write a haiku about",
		"List three risks of", "Draft a short email about", "Give pros and cons of", "Outline a talk on",
	}
	promptSubjects = []string{
		"the quarterly sales report", "a migration to Kubernetes", "photosynthesis",
		"the history of the printing press", "GPU memory fragmentation", "a weekend trip to Lisbon",
		"unit testing legacy code", "the water cycle", "remote team onboarding", "vector databases",
	}
	promptWords = []string{"party", "launch", "birthday", "weekend", "deploy", "pizza", "cats", "exam", "concert", "holiday"}
	promptEmoji = []string{"😂", "🔥", "🎉", "🙏", "😍", "🚀", "🤖", "💯", "✨", "🥳", "😭", "👀"}
)

// healthyPrompts returns n ordinary prompts, about one in ten with code. None
// hashes into the S2 family, so only S2 requests carry that prefix.
func healthyPrompts(rng *rand.Rand, n int) []prompt {
	out := make([]prompt, 0, n)
	for len(out) < n {
		var p prompt
		task, subject := promptTasks[rng.IntN(len(promptTasks))], promptSubjects[rng.IntN(len(promptSubjects))]
		if rng.IntN(10) == 0 {
			p.code = true
			p.text = fmt.Sprintf("Review this Python function (ticket #%d):\n```python\ndef total(xs):\n    return sum(x * %d for x in xs)\n```",
				rng.IntN(90000)+10000, rng.IntN(9)+2)
		} else {
			p.text = fmt.Sprintf("%s %s (ticket #%d).", task, subject, rng.IntN(90000)+10000)
		}
		p.hash = golden.HashInput(p.text)
		if strings.HasPrefix(p.hash, slowInputPrefix) {
			continue
		}
		p.tokens = 150 + rng.IntN(550) // the prompt plus the system prompt and retrieved context
		out = append(out, p)
	}
	return out
}

// emojiPrompts returns n emoji-heavy prompts whose input_hash starts with
// slowInputPrefix: candidates are drawn from rng until the hash matches
// (1 in 256 tries), so the family is the same for the same seed.
func emojiPrompts(rng *rand.Rand, n int) []prompt {
	out := make([]prompt, 0, n)
	var b strings.Builder
	for len(out) < n {
		b.Reset()
		for w := range 10 {
			if w > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(promptWords[rng.IntN(len(promptWords))])
			for range 2 + rng.IntN(4) {
				b.WriteString(promptEmoji[rng.IntN(len(promptEmoji))])
			}
		}
		text := b.String()
		hash := golden.HashInput(text)
		if !strings.HasPrefix(hash, slowInputPrefix) {
			continue
		}
		// Every emoji splits into several tokens: about 3.2x an ordinary prompt.
		out = append(out, prompt{text: text, hash: hash, tokens: int(float64(150+rng.IntN(550)) * 3.2)})
	}
	return out
}
