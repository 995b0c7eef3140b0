// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// Just enough of ENS for the tests: a registry, a resolver with addr and
// text records, and an ENSIP-10 wildcard resolver that answers through
// CCIP-Read (EIP-3668).

contract TestENSRegistry {
    struct Record {
        address owner;
        address resolver;
    }

    address private immutable admin;
    mapping(bytes32 => Record) private records;

    constructor() {
        admin = msg.sender;
    }

    function setRecord(bytes32 node, address owner_, address resolver_) external {
        require(msg.sender == admin, "not admin");
        records[node] = Record(owner_, resolver_);
    }

    function owner(bytes32 node) external view returns (address) {
        return records[node].owner;
    }

    function resolver(bytes32 node) external view returns (address) {
        return records[node].resolver;
    }
}

contract TestPublicResolver {
    address private immutable admin;
    mapping(bytes32 => address) private addrs;
    mapping(bytes32 => mapping(string => string)) private texts;

    constructor() {
        admin = msg.sender;
    }

    function setAddr(bytes32 node, address a) external {
        require(msg.sender == admin, "not admin");
        addrs[node] = a;
    }

    function setText(bytes32 node, string calldata key, string calldata value) external {
        require(msg.sender == admin, "not admin");
        texts[node][key] = value;
    }

    function addr(bytes32 node) external view returns (address) {
        return addrs[node];
    }

    function text(bytes32 node, string calldata key) external view returns (string memory) {
        return texts[node][key];
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0x3b3b57de || id == 0x59d1d43c;
    }
}

error OffchainLookup(address sender, string[] urls, bytes callData, bytes4 callbackFunction, bytes extraData);

contract TestOffchainResolver {
    string[] private urls;

    constructor(string[] memory urls_) {
        for (uint256 i = 0; i < urls_.length; i++) {
            urls.push(urls_[i]);
        }
    }

    function supportsInterface(bytes4 id) external pure returns (bool) {
        return id == 0x01ffc9a7 || id == 0x9061b923;
    }

    // The gateway gets the whole resolve(bytes,bytes) call and answers with
    // the ABI-encoded record.
    function resolve(bytes calldata name, bytes calldata data) external view returns (bytes memory) {
        bytes memory callData = abi.encodeWithSelector(this.resolve.selector, name, data);
        revert OffchainLookup(address(this), urls, callData, this.resolveWithProof.selector, callData);
    }

    // An empty answer sends the client back to the gateway, so tests can
    // check that clients bound the number of lookups.
    function resolveWithProof(bytes calldata response, bytes calldata extraData) external view returns (bytes memory) {
        if (response.length == 0) {
            revert OffchainLookup(address(this), urls, extraData, this.resolveWithProof.selector, extraData);
        }
        return response;
    }
}
