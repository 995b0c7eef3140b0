// Package chaintest resolves agent names through package ens against a real
// EVM: go-ethereum's simulated backend running the contracts in
// ens/testdata/contracts (a 6022-style registry and collection, an ENS
// registry with a resolver, and a wildcard resolver answering through
// CCIP-Read from a local gateway).
//
// It holds only tests and benchmarks, and is the one package that imports
// the simulated backend, which is slow to compile; the other tests of ens
// use an in-memory ContractCaller.
package chaintest
