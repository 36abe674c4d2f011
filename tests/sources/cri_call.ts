/** One raw CRI call through the embedded schema, for reading what the client does not keep. */
import { runtimeSocketPath } from "../../lib/sources/cri.ts";
import {
  type CriApiVersion,
  criServices,
  type RuntimeMethod,
} from "../../lib/sources/cri_proto.ts";
import { grpcStatusName, GrpcUnaryClient } from "../../lib/sources/grpc_unary.ts";

export async function criCall(
  endpoint: string,
  api: CriApiVersion,
  method: RuntimeMethod,
  request: unknown,
): Promise<unknown> {
  const codec = criServices()[api][method];
  const connection = new GrpcUnaryClient(runtimeSocketPath(endpoint)!);
  try {
    const outcome = await connection.call(codec.path, codec.encodeRequest(request), 5_000);
    if (!outcome.ok) {
      throw new Error(`${codec.path}: ${grpcStatusName(outcome.code)}: ${outcome.details}`);
    }
    return codec.decodeResponse(outcome.message);
  } finally {
    connection.close();
  }
}
