package foundry

import (
	"fmt"
	"math/rand/v2"

	"github.com/loom-otel/loom/internal/golden"
)

// prompt is a synthetic user input (never real user text).
type prompt struct {
	text   string
	hash   string // golden.HashInput(text): what goldenfield computes from gen_ai.prompt
	tokens int    // input tokens after templating
}

var (
	chatAsks = []string{
		"How do I rotate the API key of workspace %d without downtime?",
		"Write a SQL query that lists invoices over %d EUR by month.",
		"Why does build %d fail with 'undefined reference to main'?",
		"Draft a reply to ticket %d: the customer was charged twice.",
		"Compare plan tiers for a team of %d seats.",
		"Extract the shipping address from order note %d.",
		"Explain the error budget policy to on-call rotation %d.",
		"Translate release note %d into plain Spanish.",
	}
	imageStyles   = []string{"a watercolor", "an isometric render", "a product photo", "a charcoal sketch", "a pixel-art tile"}
	imageSubjects = []string{"a lighthouse at dusk", "a ceramic teapot", "a mountain bike on gravel", "a bowl of ramen", "a fox in snow"}
)

func chatPrompts(rng *rand.Rand, n int) []prompt {
	out := make([]prompt, n)
	for i := range out {
		text := fmt.Sprintf(chatAsks[rng.IntN(len(chatAsks))], 100+rng.IntN(9900))
		out[i] = prompt{text: text, hash: golden.HashInput(text), tokens: 80 + rng.IntN(820)}
	}
	return out
}

func imagePrompts(rng *rand.Rand, n int) []prompt {
	out := make([]prompt, n)
	for i := range out {
		text := fmt.Sprintf("%s of %s, seed %d", imageStyles[rng.IntN(len(imageStyles))], imageSubjects[rng.IntN(len(imageSubjects))], rng.IntN(1_000_000))
		out[i] = prompt{text: text, hash: golden.HashInput(text), tokens: 12 + rng.IntN(60)}
	}
	return out
}
