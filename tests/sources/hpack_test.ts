import { deepStrictEqual as assertEquals, throws as assertThrows } from "node:assert/strict";
import {
  encodeHeaders,
  type HeaderField,
  HpackDecoder,
  HpackError,
  huffmanDecode,
} from "../../lib/sources/h2/hpack.ts";

const hex = (text: string) =>
  new Uint8Array(text.replace(/\s+/g, "").match(/../g)!.map((b) => parseInt(b, 16)));

const REQUESTS: HeaderField[][] = [
  [[":method", "GET"], [":scheme", "http"], [":path", "/"], [":authority", "www.example.com"]],
  [
    [":method", "GET"],
    [":scheme", "http"],
    [":path", "/"],
    [":authority", "www.example.com"],
    ["cache-control", "no-cache"],
  ],
  [
    [":method", "GET"],
    [":scheme", "https"],
    [":path", "/index.html"],
    [":authority", "www.example.com"],
    ["custom-key", "custom-value"],
  ],
];

const COOKIE = "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1";
const RESPONSES: HeaderField[][] = [
  [
    [":status", "302"],
    ["cache-control", "private"],
    ["date", "Mon, 21 Oct 2013 20:13:21 GMT"],
    ["location", "https://www.example.com"],
  ],
  [
    [":status", "307"],
    ["cache-control", "private"],
    ["date", "Mon, 21 Oct 2013 20:13:21 GMT"],
    ["location", "https://www.example.com"],
  ],
  [
    [":status", "200"],
    ["cache-control", "private"],
    ["date", "Mon, 21 Oct 2013 20:13:22 GMT"],
    ["location", "https://www.example.com"],
    ["content-encoding", "gzip"],
    ["set-cookie", COOKIE],
  ],
];

/** Each block of a sequence decoded on one context: its fields, then the table's size and
 *  entries (RFC 7541 Appendix C states both after every block). */
const SEQUENCES: {
  name: string;
  tableSize: number;
  blocks: { block: string; fields: HeaderField[]; size: number; table: HeaderField[] }[];
}[] = [
  ...[
    {
      name: "C.3 requests without Huffman",
      blocks: [
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
      ],
    },
    {
      name: "C.4 requests with Huffman",
      blocks: [
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
      ],
    },
  ].map(({ name, blocks }) => ({
    name,
    tableSize: 4096,
    blocks: blocks.map((block, i) => ({
      block,
      fields: REQUESTS[i],
      size: [57, 110, 164][i],
      table: ([
        [[":authority", "www.example.com"]],
        [["cache-control", "no-cache"], [":authority", "www.example.com"]],
        [["custom-key", "custom-value"], ["cache-control", "no-cache"], [
          ":authority",
          "www.example.com",
        ]],
      ] as HeaderField[][])[i],
    })),
  })),
  ...[
    {
      name: "C.5 responses without Huffman, entries evicted",
      blocks: [
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133" +
        "2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70" +
        "6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d" +
        "54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049" +
        "5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e" +
        "3d31",
      ],
    },
    {
      name: "C.6 responses with Huffman, entries evicted",
      blocks: [
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6" +
        "2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab" +
        "77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f" +
        "9587 3160 65c0 03ed 4ee5 b106 3d50 07",
      ],
    },
  ].map(({ name, blocks }) => ({
    name,
    tableSize: 256,
    blocks: blocks.map((block, i) => ({
      block,
      fields: RESPONSES[i],
      size: [222, 222, 215][i],
      table: ([
        [
          ["location", "https://www.example.com"],
          ["date", "Mon, 21 Oct 2013 20:13:21 GMT"],
          ["cache-control", "private"],
          [":status", "302"],
        ],
        [
          [":status", "307"],
          ["location", "https://www.example.com"],
          ["date", "Mon, 21 Oct 2013 20:13:21 GMT"],
          ["cache-control", "private"],
        ],
        [
          ["set-cookie", COOKIE],
          ["content-encoding", "gzip"],
          ["date", "Mon, 21 Oct 2013 20:13:22 GMT"],
        ],
      ] as HeaderField[][])[i],
    })),
  })),
];

for (const sequence of SEQUENCES) {
  Deno.test(`HPACK decodes RFC 7541 ${sequence.name}`, () => {
    const decoder = new HpackDecoder(sequence.tableSize);
    for (const [i, step] of sequence.blocks.entries()) {
      assertEquals(decoder.decode(hex(step.block)), step.fields, `block ${i + 1}`);
      assertEquals(decoder.tableSize, step.size, `table size after block ${i + 1}`);
      assertEquals(decoder.table, step.table, `table after block ${i + 1}`);
    }
  });
}

Deno.test("HPACK decodes RFC 7541 C.2's single fields of each representation", () => {
  const cases: [string, HeaderField, number][] = [
    // Literal with indexing: added to the table.
    [
      "400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572",
      ["custom-key", "custom-header"],
      55,
    ],
    // Without indexing, never indexed, indexed: the table stays empty.
    ["040c 2f73 616d 706c 652f 7061 7468", [":path", "/sample/path"], 0],
    ["1008 7061 7373 776f 7264 0673 6563 7265 74", ["password", "secret"], 0],
    ["82", [":method", "GET"], 0],
  ];
  for (const [block, field, size] of cases) {
    const decoder = new HpackDecoder();
    assertEquals(decoder.decode(hex(block)), [field]);
    assertEquals(decoder.tableSize, size);
  }
});

Deno.test("HPACK: a table size update shrinks the table, evicting; past our limit it is refused", () => {
  const decoder = new HpackDecoder(256);
  decoder.decode(hex("400a 6375 7374 6f6d 2d6b 6579 0d63 7573 746f 6d2d 6865 6164 6572"));
  assertEquals(decoder.tableSize, 55);
  assertEquals(decoder.decode(hex("20 82")), [[":method", "GET"]]); // size 0, then a field
  assertEquals(decoder.tableSize, 0);
  assertThrows(() => new HpackDecoder(256).decode(hex("3fe2 01")), HpackError); // 256 + 1
  assertThrows(() => new HpackDecoder().decode(hex("82 20")), HpackError); // after a field
});

Deno.test("HPACK refuses what breaks RFC 7541: index 0 or past the tables, cut strings, bad padding", () => {
  for (const block of ["80", "be", "0f", "04 0c 2f73", "40"]) {
    assertThrows(() => new HpackDecoder().decode(hex(block)), HpackError, block);
  }
  // "www.example.com" with its last padding bits zeros, then with a whole byte of padding.
  assertThrows(() => huffmanDecode(hex("f1e3 c2e5 f23a 6ba0 ab90 f400")), HpackError);
  assertThrows(() => huffmanDecode(hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff ff")), HpackError);
  assertEquals(huffmanDecode(hex("f1e3 c2e5 f23a 6ba0 ab90 f4ff")), "www.example.com");
  assertThrows(() => new HpackDecoder().decode(hex("82 84"), 60), HpackError, "list too long");
});

Deno.test("HPACK encodes literals without indexing, credentials never indexed, static names by index; they decode back", () => {
  assertEquals(
    encodeHeaders([[":path", "/sample/path"]]),
    hex("040c 2f73 616d 706c 652f 7061 7468"),
  );
  // Credentials are never indexed (RFC 7541 §6.2.3): authorization is static index 23.
  assertEquals(encodeHeaders([["authorization", "x"]]), hex("1f08 0178"));
  const fields: HeaderField[] = [
    [":method", "GET"],
    [":path", `/api/v1/pods?${"x".repeat(300)}`],
    ["authorization", `Bearer ${"t".repeat(2000)}`],
    ["x-ünïcode", "välue"],
  ];
  const decoder = new HpackDecoder();
  assertEquals(decoder.decode(encodeHeaders(fields)), fields);
  assertEquals(decoder.tableSize, 0);
});
