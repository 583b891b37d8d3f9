"""The decoding core: the Stepper protocol, search strategies and samplers, the decoding
contract written into every manifest, and the counter-based random stream."""
