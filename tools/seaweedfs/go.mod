module github.com/npa-pulumi/toolchain/seaweedfs

go 1.26

// SeaweedFS's own go.mod has this replace, and Go ignores a dependency's replaces: it is repeated here,
// the one of them the build of `weed` needs.
replace github.com/tyler-smith/go-bip39 => github.com/cosmos/go-bip39 v1.0.0

require github.com/seaweedfs/seaweedfs v0.0.0-20261109003541-7506e5f91cd6
