package main

import (
	"maps"

	"github.com/conclavehq/conclave/agents/llm"
)

// llmProfiles turns [llm] and [llm.profiles.*] into client profiles: a
// named profile inherits every key it does not set from [llm] (except the
// API key and the headers when it names another base URL).
func llmProfiles(c LLMConfig) (llm.Profile, map[string]llm.Profile) {
	def := mergeProfile(llm.Profile{Name: ""}, c.LLMProfileConfig)
	named := make(map[string]llm.Profile, len(c.Profiles))
	for name, p := range c.Profiles {
		base := def
		base.Name = name
		base.Headers = maps.Clone(def.Headers)
		// A profile pointing at another endpoint never inherits the default
		// key, nor the headers, which may carry one (x-api-key): they would
		// be sent to a third party.
		if p.BaseURL != nil && *p.BaseURL != def.BaseURL {
			if p.APIKey == nil {
				base.APIKey = ""
			}
			base.Headers = nil
		}
		named[name] = mergeProfile(base, p)
	}
	return def, named
}

func mergeProfile(p llm.Profile, c LLMProfileConfig) llm.Profile {
	set := func(dst *string, src *string) {
		if src != nil {
			*dst = *src
		}
	}
	set(&p.BaseURL, c.BaseURL)
	set(&p.APIKey, c.APIKey)
	set(&p.Model, c.Model)
	if c.Temperature != nil {
		t := *c.Temperature
		p.Temperature = &t
	}
	if c.MaxTokens != nil {
		p.MaxTokens = *c.MaxTokens
	}
	if c.MaxInputTokens != nil {
		p.MaxInputTokens = *c.MaxInputTokens
	}
	if c.Timeout != nil {
		p.Timeout = c.Timeout.Duration
	}
	if c.TotalTimeout != nil {
		p.TotalTimeout = c.TotalTimeout.Duration
	}
	if c.IdleTimeout != nil {
		p.IdleTimeout = c.IdleTimeout.Duration
	}
	if c.MaxRetries != nil {
		p.MaxRetries = *c.MaxRetries
	}
	if c.JSONMode != nil {
		p.JSONMode = *c.JSONMode
	}
	if c.MergeConsecutive != nil {
		p.MergeConsecutive = *c.MergeConsecutive
	}
	if len(c.Headers) > 0 {
		if p.Headers == nil {
			p.Headers = map[string]string{}
		}
		maps.Copy(p.Headers, c.Headers)
	}
	return p
}
