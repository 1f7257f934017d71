const a = 1;
console.log("ready");
const b = 2;
