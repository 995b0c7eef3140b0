// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

// The read side of 6022's AgentEnsRegistry and AgentCollectionV1, with the
// setters the tests need. Shapes follow the published ABIs; access control,
// moderation and events are left out.

struct KeyValue {
    string key;
    string value;
}

struct AgentAddress {
    string addressType;
    string value;
}

struct NullableUint256 {
    bool isSet;
    uint256 value;
}

struct AgentInformation {
    string name;
    address creator;
    KeyValue[] images;
    KeyValue[] attributes;
    NullableUint256 cloneOf;
    AgentAddress[] addresses;
}

contract TestAgentEnsRegistry {
    struct Ref {
        address collection;
        uint256 tokenId;
    }

    address private immutable admin;
    mapping(bytes32 => Ref) private refs;
    mapping(bytes32 => mapping(string => string)) private texts;

    constructor() {
        admin = msg.sender;
    }

    modifier onlyAdmin() {
        require(msg.sender == admin, "not admin");
        _;
    }

    function provision(bytes32 node, address collection, uint256 tokenId) external onlyAdmin {
        refs[node] = Ref(collection, tokenId);
    }

    function setText(bytes32 node, string calldata key, string calldata value) external onlyAdmin {
        texts[node][key] = value;
    }

    function agentRef(bytes32 node) external view returns (address collection, uint256 tokenId) {
        Ref storage r = refs[node];
        return (r.collection, r.tokenId);
    }

    function text(bytes32 node, string calldata key) external view returns (string memory) {
        return texts[node][key];
    }
}

contract TestAgentCollection {
    error ERC721NonexistentToken(uint256 tokenId);

    uint256 public nextTokenId;
    mapping(uint256 => address) private owners;
    mapping(uint256 => AgentInformation) private infos;

    function mint(
        address to,
        string calldata agentName,
        AgentAddress[] calldata addresses,
        KeyValue[] calldata images,
        KeyValue[] calldata attributes,
        NullableUint256 calldata cloneOf
    ) external returns (uint256 tokenId) {
        tokenId = nextTokenId++;
        owners[tokenId] = to;
        AgentInformation storage info = infos[tokenId];
        info.name = agentName;
        info.creator = msg.sender;
        info.cloneOf = cloneOf;
        for (uint256 i = 0; i < addresses.length; i++) {
            info.addresses.push(AgentAddress(addresses[i].addressType, addresses[i].value));
        }
        for (uint256 i = 0; i < images.length; i++) {
            info.images.push(KeyValue(images[i].key, images[i].value));
        }
        for (uint256 i = 0; i < attributes.length; i++) {
            info.attributes.push(KeyValue(attributes[i].key, attributes[i].value));
        }
    }

    function transferFrom(address from, address to, uint256 tokenId) external {
        require(owners[tokenId] == from && from == msg.sender, "not owner");
        owners[tokenId] = to;
    }

    function ownerOf(uint256 tokenId) public view returns (address) {
        address owner = owners[tokenId];
        if (owner == address(0)) revert ERC721NonexistentToken(tokenId);
        return owner;
    }

    function nameOf(uint256 tokenId) external view returns (string memory) {
        ownerOf(tokenId);
        return infos[tokenId].name;
    }

    function informationOf(uint256 tokenId) external view returns (AgentInformation memory) {
        ownerOf(tokenId);
        return infos[tokenId];
    }
}
