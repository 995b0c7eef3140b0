package main

import (
	"log/slog"

	"github.com/conclavehq/conclave/agents"
	"github.com/conclavehq/conclave/agents/pairing"
	"github.com/conclavehq/conclave/bot"
	"github.com/conclavehq/conclave/ens"
	"github.com/conclavehq/conclave/memory"
)

// wireCommands builds the slash command handler over the Web API side and
// the engine, and the wallet verifier, whose page is served under /wallet/
// (when http.public_url is empty it serves nothing and /verify-wallet says
// so).
func wireCommands(cfg Config, web *bot.WebAPI, eng *agents.Engine, store memory.Store, directory *ens.Directory, log *slog.Logger) (*bot.Commands, *bot.WalletVerifier, error) {
	wallet, err := bot.NewWalletVerifier(bot.WalletOptions{PublicURL: cfg.HTTP.PublicURL, Logger: log, TrustedProxies: cfg.HTTP.trustedProxies()}, store, web)
	if err != nil {
		return nil, nil, err
	}
	commands := bot.NewCommands(web, bot.CommandOptions{Admins: cfg.Slack.Admins, Logger: log}, bot.CommandDeps{
		Registry:   eng,
		Identities: directory,
		Pairing:    pairing.New(store, directory, nil),
		Wallet:     wallet,
		Feedback:   eng,
	})
	if !wallet.Configured() {
		log.Info("wallet verification is off: http.public_url is not set")
	}
	return commands, wallet, nil
}
