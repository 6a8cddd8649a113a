import { Serializers } from "moleculer";
import { Packr } from "msgpackr";

/**
 * The cluster's wire format: MessagePack through msgpackr. Records are off so every packet is
 * self-describing (nodes share no structure table), and maps decode as plain objects.
 */
export class MsgpackrSerializer extends Serializers.Base {
  private readonly packr = new Packr({ useRecords: false, mapsAsObjects: true, moreTypes: false });

  override serialize(obj: Record<string, any>): Buffer {
    return this.packr.pack(obj);
  }

  override deserialize(buf: Buffer): any {
    return this.packr.unpack(buf);
  }
}
