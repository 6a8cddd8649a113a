// The pieces every page is built of, one concern per file.
export * from "./account";
export * from "./data";
export * from "./states";
export * from "./table";
export * from "./fields";
export * from "./display";
export * from "./dialogs";
